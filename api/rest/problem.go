package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// ProblemContentType is the media type of every error response (RFC 9457).
const ProblemContentType = "application/problem+json"

// ProblemTypePrefix starts every problem type URI. The rest is a stable
// slug: the airlock.Error's Type if set, else one derived from its code
// ("not_found" becomes "not-found").
const ProblemTypePrefix = "urn:airlock:problem:"

// Problem is an RFC 9457 problem document. Code is an extension member: the
// airlock error code (airlock.EINVALID and so on), so clients need not parse
// Type to classify an error.
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

// problemFields is Problem without its methods, for encoding.
type problemFields Problem

// reservedMember says whether a member name is one of Problem's own.
func reservedMember(name string) bool {
	switch name {
	case "type", "title", "status", "detail", "instance", "code", "findings", "execution_id":
		return true
	}
	return false
}

// MarshalJSON writes the problem's members and then its extensions.
func (p Problem) MarshalJSON() ([]byte, error) {
	body, err := json.Marshal(problemFields(p))
	if err != nil || len(p.Extensions) == 0 {
		return body, err
	}
	ext := make(map[string]any, len(p.Extensions))
	for k, v := range p.Extensions {
		if !reservedMember(k) && k != "" {
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
	var f problemFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	f.Extensions = nil
	for k, raw := range all {
		if reservedMember(k) {
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

// StatusFor returns the HTTP status of an airlock error code (the one
// table, airlock.HTTPStatus); 500 for a code it does not know.
func StatusFor(code string) int { return airlock.HTTPStatus(code) }

// slugFor returns the default problem slug of a code.
func slugFor(code string) string {
	if code == "" {
		code = airlock.EINTERNAL
	}
	return strings.ReplaceAll(code, "_", "-")
}

// newProblem builds a problem document; status 0 means StatusFor(code).
func newProblem(code, typ string, status int, detail string) *Problem {
	if status == 0 {
		status = StatusFor(code)
	}
	if typ == "" {
		typ = slugFor(code)
	}
	return &Problem{
		Type:   ProblemTypePrefix + typ,
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
		Code:   code,
	}
}

// problemFor turns an error into the problem sent to the client. Internal
// errors (code EINTERNAL, including every error that is not an
// *airlock.Error) become a bare "internal error": their text is for the log
// only, and internal reports whether the caller must log it.
func problemFor(err error) (p *Problem, internal bool) {
	var e *airlock.Error
	if !errors.As(err, &e) || e.Code == airlock.EINTERNAL || e.Code == "" {
		return newProblem(airlock.EINTERNAL, "", 0, "internal error"), true
	}
	if !airlock.KnownCode(e.Code) {
		return newProblem(airlock.EINTERNAL, "", 0, "internal error"), true
	}
	p = newProblem(e.Code, e.Type, 0, e.Message)
	p.Extensions = airlock.ExtensionsOf(err)
	if e.Refusal != nil {
		p.Findings, p.ExecutionID = e.Refusal.Findings, e.Refusal.ExecutionID
	}
	return p, false
}

// RetryAfterMember is the problem member that carries, in whole seconds,
// the Retry-After of a problem sent where no header can go: an event
// stream's error event, after the stream's headers were sent.
const RetryAfterMember = "retry_after"

// streamProblem is problemFor for an event stream's error event: the
// retry hint, which a response would send as Retry-After, goes in the
// retry_after member.
func streamProblem(err error) *Problem {
	p, internal := problemFor(err)
	if d := airlock.RetryAfterOf(err); d > 0 && !internal {
		ext := make(map[string]any, len(p.Extensions)+1)
		for k, v := range p.Extensions {
			ext[k] = v
		}
		secs, _ := strconv.Atoi(RetryAfterSeconds(d))
		ext[RetryAfterMember] = secs
		p.Extensions = ext
	}
	return p
}

// ErrorFromProblem maps a problem document back to the domain error: Code
// from the problem's code member (or, if missing or unknown, from its
// status), Type from the slug of its type URI, Message from its detail (or
// title). It returns nil for a nil problem.
func ErrorFromProblem(p *Problem) *airlock.Error {
	if p == nil {
		return nil
	}
	code := p.Code
	if !airlock.KnownCode(code) {
		code = airlock.CodeForStatus(p.Status)
	}
	typ := strings.TrimPrefix(p.Type, ProblemTypePrefix)
	if typ == p.Type { // not one of ours (or "about:blank")
		typ = ""
	}
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

// RetryAfterSeconds renders d as the value of a Retry-After header: whole
// seconds, rounded up, at least 1.
func RetryAfterSeconds(d time.Duration) string {
	secs := int64((d + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	return strconv.FormatInt(secs, 10)
}

// maxRetryAfter bounds what a Retry-After header can ask for, so a hostile
// or broken server cannot make a client wait for ever.
const maxRetryAfter = 24 * time.Hour

// parseRetryAfter reads a Retry-After header: delay-seconds or an
// HTTP-date (RFC 9110, section 10.2.3). It returns 0 for anything else and
// for a date that has passed, and at most maxRetryAfter.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

// maxProblemBytes bounds how much of an error response DecodeProblem reads.
const maxProblemBytes = 64 << 10

// DecodeProblem returns the error an HTTP response stands for: nil for a
// status below 400, else an *airlock.Error mapped from the problem document
// in the body (see ErrorFromProblem) or, if the body is not one, from the
// status alone, with RetryAfter from the Retry-After header. It reads at
// most 64 KiB of the body and does not close it.
func DecodeProblem(resp *http.Response) error {
	if resp.StatusCode < 400 {
		return nil
	}
	var p Problem
	ok := false
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil &&
		(mt == ProblemContentType || mt == "application/json") && resp.Body != nil {
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
		ok = err == nil && json.Unmarshal(body, &p) == nil && (p.Type != "" || p.Code != "")
	}
	if !ok {
		p = Problem{Status: resp.StatusCode, Detail: fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))}
	}
	if p.Status == 0 {
		p.Status = resp.StatusCode
	}
	e := ErrorFromProblem(&p)
	e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return e
}
