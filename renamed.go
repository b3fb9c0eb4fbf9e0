package airlock

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The API's naming rules (docs/api.md and docs/api-deprecations.md):
// durations end in their unit (_s, or _ms where a fraction of a second
// matters); sizes end in theirs (_bytes, _mib); instants end in _at
// (RFC 3339); identifiers are <thing>_id, a record's own included. A
// field that broke a rule was renamed in release RenamedIn; its old name
// stays for one release, until RemovedIn.
const (
	RenamedIn = "1.1.0"
	RemovedIn = "2.0.0"
)

// A RenamedField is one API field renamed to follow the naming rules.
// Schema is the OpenAPI schema (and Go type) it belongs to. On input (a
// request type) the old name is accepted instead of the new one, and a
// request with both and different values is refused
// (conflicting-fields); on output both are sent, with the same value.
type RenamedField struct {
	Schema string
	Old    string
	New    string
	Input  bool // a request field; otherwise a response field
}

// RenamedFields is every field renamed in release RenamedIn; the REST
// front end, the OpenAPI document and docs/api-deprecations.md follow it.
var RenamedFields = []RenamedField{
	{Schema: "ExecuteRequest", Old: "timeout_sec", New: "timeout_s", Input: true},
	{Schema: "SessionExecRequest", Old: "timeout_sec", New: "timeout_s", Input: true},
	{Schema: "RunCellRequest", Old: "timeout_sec", New: "timeout_s", Input: true},
	{Schema: "Execution", Old: "peak_memory_mb", New: "peak_memory_mib"},
	{Schema: "Artifact", Old: "id", New: "artifact_id"},
	{Schema: "SessionUsage", Old: "memory_mb", New: "memory_mib"},
	{Schema: "SessionUsage", Old: "peak_memory_mb", New: "peak_memory_mib"},
	{Schema: "SessionUsage", Old: "bytes_uploaded", New: "uploaded_bytes"},
	{Schema: "SessionUsage", Old: "bytes_downloaded", New: "downloaded_bytes"},
	{Schema: "FileEntry", Old: "size", New: "size_bytes"},
	{Schema: "FileEntry", Old: "mtime", New: "modified_at"},
	{Schema: "PutFileResult", Old: "size", New: "size_bytes"},
	{Schema: "Snapshot", Old: "bytes", New: "size_bytes"},
	{Schema: "EgressEvent", Old: "time", New: "occurred_at"},
	{Schema: "EgressEvent", Old: "bytes_up", New: "up_bytes"},
	{Schema: "EgressEvent", Old: "bytes_down", New: "down_bytes"},
	{Schema: "AbuseEvent", Old: "time", New: "occurred_at"},
	{Schema: "Usage", Old: "at", New: "measured_at"},
	{Schema: "AuditEntry", Old: "id", New: "audit_id"},
	{Schema: "AuditEntry", Old: "at", New: "occurred_at"},
	{Schema: "AdminTenant", Old: "id", New: "tenant_id"},
}

// RenamedFieldsOf returns the renamed fields of one schema.
func RenamedFieldsOf(schema string) []RenamedField {
	var out []RenamedField
	for _, f := range RenamedFields {
		if f.Schema == schema {
			out = append(out, f)
		}
	}
	return out
}

// ProblemConflictingFields is what a request that gives a field under its
// old and its new name, with different values, is refused with.
const ProblemConflictingFields = "conflicting-fields"

// RenameOldFields rewrites the members of one JSON object that carry an
// old name of schema to the new name. It refuses (EINVALID,
// conflicting-fields) an object that gives both names with different
// values; one given twice with the same value is kept once. Anything but
// an object is returned as it is.
func RenameOldFields(schema string, obj []byte) ([]byte, error) {
	renames := RenamedFieldsOf(schema)
	if len(renames) == 0 || !isObject(obj) {
		return obj, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return obj, nil // the caller's decoder reports it
	}
	changed := false
	for _, r := range renames {
		old, ok := m[r.Old]
		if !ok {
			continue
		}
		if cur, both := m[r.New]; both && !sameJSON(cur, old) {
			return nil, Problem(EINVALID, ProblemConflictingFields,
				"%q and its deprecated alias %q are both given, with different values; give %q only", r.New, r.Old, r.New)
		}
		m[r.New] = old
		delete(m, r.Old)
		changed = true
	}
	if !changed {
		return obj, nil
	}
	return json.Marshal(m)
}

// MarshalWithOldNames marshals v (a struct without a MarshalJSON method) and
// adds, after its members, each renamed field of schema under its old
// name with the new one's value.
func MarshalWithOldNames(schema string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || !isObject(b) {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	var extra bytes.Buffer
	for _, r := range RenamedFieldsOf(schema) {
		val, ok := m[r.New]
		if _, dup := m[r.Old]; !ok || dup {
			continue
		}
		name, _ := json.Marshal(r.Old)
		fmt.Fprintf(&extra, ",%s:%s", name, val)
	}
	if extra.Len() == 0 {
		return b, nil
	}
	b = bytes.TrimRight(b, " \n")
	if bytes.Equal(b, []byte("{}")) {
		return append([]byte("{"), append(extra.Bytes()[1:], '}')...), nil
	}
	out := append(b[:len(b)-1:len(b)-1], extra.Bytes()...)
	return append(out, '}'), nil
}

// UnmarshalWithOldNames unmarshals b into v (a pointer to a struct without an
// UnmarshalJSON method), reading a renamed field of schema under its old
// name when the new one is absent: an answer of an earlier server.
func UnmarshalWithOldNames(schema string, b []byte, v any) error {
	if isObject(b) && len(RenamedFieldsOf(schema)) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err == nil {
			changed := false
			for _, r := range RenamedFieldsOf(schema) {
				if old, ok := m[r.Old]; ok {
					if _, both := m[r.New]; !both {
						m[r.New] = old
					}
					delete(m, r.Old)
					changed = true
				}
			}
			if changed {
				if nb, err := json.Marshal(m); err == nil {
					b = nb
				}
			}
		}
	}
	return json.Unmarshal(b, v)
}

func isObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// sameJSON reports whether two JSON values are equal as values.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
