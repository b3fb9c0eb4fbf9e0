package problem

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/airlockhq/airlock"
)

// ContentType is the media type of every error response (RFC 9457).
const ContentType = "application/problem+json"

// TypePrefix starts every problem type URI. The rest is a stable slug:
// the airlock.Error's Type if set, else one derived from its code
// ("not_found" becomes "not-found"). The type is a relative reference,
// which RFC 9457 (section 3.1.1) resolves against the request's URI: so
// it names the catalogue page of the server that answered
// (GET /problems/<slug>), whatever host, scheme or proxy the client came
// through, and is the same string from every node of a fleet. Clients
// compare the slug (Slug), never the whole URI.
const TypePrefix = "/problems/"

// LegacyTypePrefix started problem type URIs before API 1.1.0
// (urn:airlock:problem:<slug>, which resolved to nothing); Slug still
// reads it, for clients of an earlier server.
const LegacyTypePrefix = "urn:airlock:problem:"

// RetryAfterMember is the problem member that carries, in whole seconds,
// the Retry-After of a problem sent where no header can go: an event
// stream's error event, after the stream's headers were sent.
const RetryAfterMember = "retry_after"

// Problem is an RFC 9457 problem document. Code is an extension member:
// the airlock error code (airlock.EINVALID and so on), so clients need
// not parse Type to classify an error.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	Code     string `json:"code,omitempty"`
	// Extensions are further members (RFC 9457, section 3.2), sent
	// beside the ones above: those of the airlock.Error the problem is
	// for, e.g. quota, limit and used of a quota problem. Members named
	// like the ones above are never taken from here.
	Extensions map[string]any `json:"-"`
	// Findings and ExecutionID are extension members of the problem
	// guard-blocked: what the guard found, and the record of the refusal.
	Findings    []airlock.GuardFinding `json:"findings,omitempty"`
	ExecutionID string                 `json:"execution_id,omitempty"`
}

// fields is Problem without its methods, for encoding.
type fields Problem

// Reserved says whether a member name is one of Problem's own (never an
// extension).
func Reserved(name string) bool {
	switch name {
	case "type", "title", "status", "detail", "instance", "code", "findings", "execution_id":
		return true
	}
	return false
}

// MarshalJSON writes the problem's members and then its extensions.
func (p Problem) MarshalJSON() ([]byte, error) {
	body, err := json.Marshal(fields(p))
	if err != nil || len(p.Extensions) == 0 {
		return body, err
	}
	ext := make(map[string]any, len(p.Extensions))
	for k, v := range p.Extensions {
		if !Reserved(k) && k != "" {
			ext[k] = v
		}
	}
	if len(ext) == 0 {
		return body, nil
	}
	more, err := json.Marshal(ext)
	if err != nil {
		return nil, err
	}
	// Both are objects: join them ({...} + {...} -> {..., ...}).
	out := append(body[:len(body)-1:len(body)-1], ',')
	return append(out, more[1:]...), nil
}

// UnmarshalJSON reads the problem's members and keeps every other
// member in Extensions.
func (p *Problem) UnmarshalJSON(b []byte) error {
	var f fields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	f.Extensions = nil
	for k, raw := range all {
		if Reserved(k) {
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		if f.Extensions == nil {
			f.Extensions = map[string]any{}
		}
		f.Extensions[k] = v
	}
	*p = Problem(f)
	return nil
}

// slugFor returns the default problem slug of a code.
func slugFor(code string) string {
	if code == "" {
		code = airlock.EINTERNAL
	}
	return strings.ReplaceAll(code, "_", "-")
}

// New builds a problem document; status 0 means Status(code), typ ""
// the code's slug.
func New(code, typ string, status int, detail string) *Problem {
	if status == 0 {
		status = Status(code)
	}
	if typ == "" {
		typ = slugFor(code)
	}
	return &Problem{
		Type:   TypePrefix + typ,
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
		Code:   code,
	}
}

// For turns an error into the problem sent to a client. Internal errors
// (code EINTERNAL or unknown, including every error that is not an
// *airlock.Error) become a bare "internal error": their text is for the
// log only, and internal reports whether the caller must log it.
func For(err error) (p *Problem, internal bool) {
	var e *airlock.Error
	if !errors.As(err, &e) || e.Code == airlock.EINTERNAL || !airlock.KnownCode(e.Code) {
		return New(airlock.EINTERNAL, "", 0, "internal error"), true
	}
	p = New(e.Code, e.Type, 0, e.Message)
	p.Extensions = airlock.ExtensionsOf(err)
	if e.Refusal != nil {
		p.Findings, p.ExecutionID = e.Refusal.Findings, e.Refusal.ExecutionID
	}
	return p, false
}

// AsError maps a problem document back to the domain error: Code from the
// problem's code member (or, if missing or unknown, from its status),
// Type from the slug of its type URI, Message from its detail (or
// title). It returns nil for a nil problem.
func (p *Problem) AsError() *airlock.Error {
	if p == nil {
		return nil
	}
	code := p.Code
	if !airlock.KnownCode(code) {
		code = CodeFor(p.Status)
	}
	typ := Slug(p.Type) // "" for a type not ours (or "about:blank")
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	if msg == "" {
		msg = http.StatusText(p.Status)
	}
	e := &airlock.Error{Code: code, Type: typ, Message: msg, Extensions: p.Extensions}
	if len(p.Findings) > 0 || p.ExecutionID != "" {
		e.Refusal = &airlock.GuardRefusal{Findings: p.Findings, ExecutionID: p.ExecutionID}
	}
	return e
}
