package rest

import (
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/airlockhq/airlock"
)

// Request bodies are decoded strictly, with github.com/go-json-experiment/json
// (encoding/json/v2): a member the target type does not know is refused
// (a typo must never fall back to a default), so is a name given twice,
// names match exactly ("Timeout_Sec" is not timeout_sec), and strings must
// be valid UTF-8. This holds at every depth, also inside values the target
// keeps raw (their syntax and names are checked as they are read).
// Responses are still encoded with encoding/json.

// decodeOptions are the options of every request body.
var decodeOptions = jsonv2.JoinOptions(
	jsonv2.RejectUnknownMembers(true),
	jsonv2.MatchCaseInsensitiveNames(false),
	jsontext.AllowDuplicateNames(false),
	jsontext.AllowInvalidUTF8(false),
)

// decodeJSON reads one JSON value from the body, at most MaxRequestBytes,
// into v. Unknown members, duplicate names, wrong types, syntax errors and
// anything but white space after the value are problems.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	// The innermost writer, so the server learns the body was cut short and
	// closes the connection instead of reading on.
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	return decodeReader(http.MaxBytesReader(w, r.Body, MaxRequestBytes), v)
}

// decodeReader is decodeJSON on any reader.
func decodeReader(body io.Reader, v any) error {
	dec := jsontext.NewDecoder(body, decodeOptions)
	if dec.PeekKind() == 0 { // nothing, or not even a first token
		_, err := dec.ReadToken()
		return jsonError(err)
	}
	if renames := inputRenames(v); renames != "" {
		// A request type with renamed fields: read the object whole,
		// give its old names the new ones, then decode it as strictly.
		val, err := dec.ReadValue()
		if err != nil {
			return jsonError(err)
		}
		obj, err := airlock.RenameOldFields(renames, val)
		if err != nil {
			return err
		}
		if err := jsonv2.Unmarshal(obj, v, decodeOptions); err != nil {
			return jsonError(err)
		}
	} else if err := jsonv2.UnmarshalDecode(dec, v, decodeOptions); err != nil {
		return jsonError(err)
	}
	end := dec.InputOffset()
	if _, err := dec.ReadToken(); err != io.EOF {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return jsonError(err)
		}
		return errorf(airlock.EINVALID, "invalid-json", "unexpected data after the JSON object at byte %d", end)
	}
	return nil
}

// jsonError turns a decoding error into a client-safe problem.
func jsonError(err error) error {
	var (
		mbe *http.MaxBytesError
		syn *jsontext.SyntacticError
		sem *jsonv2.SemanticError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &mbe):
		return errorf(airlock.ETOOLARGE, "request-too-large", "request body is larger than %d bytes", mbe.Limit)
	case errors.Is(err, io.EOF):
		return errorf(airlock.EINVALID, "invalid-json", "request body is empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(airlock.EINVALID, "invalid-json", "request body ends in the middle of the JSON object")
	case errors.As(err, &syn) && errors.Is(syn.Err, jsontext.ErrDuplicateName):
		return errorf(airlock.EINVALID, "duplicate-field", "field %q is given more than once", fieldName(syn.JSONPointer))
	case errors.As(err, &syn) && syn.Err != nil && strings.Contains(syn.Err.Error(), "invalid UTF-8"):
		// The library exports no sentinel for this one; if its text
		// changes, the case below still answers.
		return errorf(airlock.EINVALID, "invalid-json", "invalid UTF-8 in a string at byte %d", syn.ByteOffset+1)
	case errors.As(err, &syn):
		// ByteOffset counts the bytes before the offending one; the
		// message names its position from 1, as encoding/json did.
		return errorf(airlock.EINVALID, "invalid-json", "malformed JSON at byte %d", syn.ByteOffset+1)
	case errors.As(err, &sem) && errors.Is(sem.Err, jsonv2.ErrUnknownName):
		name := fieldName(sem.JSONPointer)
		if known := knownFields(sem.GoType); known != "" {
			return errorf(airlock.EINVALID, "unknown-field", "unknown field %q; known fields here: %s", name, known)
		}
		return errorf(airlock.EINVALID, "unknown-field", "unknown field %q", name)
	case errors.As(err, &sem):
		return typeError(sem)
	}
	return errorf(airlock.EINVALID, "invalid-json", "request body could not be read as JSON")
}

// typeError describes a value of the wrong type.
func typeError(sem *jsonv2.SemanticError) error {
	got := jsonKindName(sem.JSONKind)
	if sem.GoType == nil {
		return errorf(airlock.EINVALID, "invalid-json", "request body could not be read as JSON")
	}
	if sem.JSONPointer == "" {
		return errorf(airlock.EINVALID, "invalid-json", "request body must be a JSON object, not %s", got)
	}
	field := fieldName(sem.JSONPointer)
	want := jsonTypeName(sem.GoType.Kind())
	if sem.JSONKind == '0' && want == "a number" {
		// A number of the right kind that does not fit: 1.5 or 1e400 for
		// an integer.
		if isInteger(sem.GoType.Kind()) {
			want = "a whole number in range"
		}
		return errorf(airlock.EINVALID, "invalid-json", "field %q must be %s, not %s", field, want, truncate(string(sem.JSONValue), 40))
	}
	return errorf(airlock.EINVALID, "invalid-json", "field %q must be %s, not %s", field, want, got)
}

// fieldName renders a JSON pointer as a dotted path of member names
// ("network.allow"); array elements show as their index.
func fieldName(p jsontext.Pointer) string {
	var parts []string
	for tok := range p.Tokens() {
		parts = append(parts, tok)
	}
	return truncate(strings.Join(parts, "."), 200)
}

// knownFields lists the JSON names of a struct type's fields, or "" if t
// is not a struct.
func knownFields(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// jsonKindName names a JSON kind the way the problem messages do.
func jsonKindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "something else"
}

func isInteger(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

// jsonTypeName names a Go kind the way a JSON user would.
func jsonTypeName(k reflect.Kind) string {
	switch {
	case k == reflect.Bool:
		return "a boolean"
	case isInteger(k), k == reflect.Float32, k == reflect.Float64:
		return "a number"
	case k == reflect.String:
		return "a string"
	case k == reflect.Slice, k == reflect.Array:
		return "an array"
	}
	return "an object"
}

// inputRenames names the schema of v when it is a request type with a
// field renamed (airlock.RenamedFields), whose old name is still read.
func inputRenames(v any) string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.PkgPath() != reflect.TypeFor[airlock.RenamedField]().PkgPath() {
		return ""
	}
	for _, f := range airlock.RenamedFieldsOf(t.Name()) {
		if f.Input {
			return t.Name()
		}
	}
	return ""
}
