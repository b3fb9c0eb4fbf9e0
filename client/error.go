package client

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/problem"
)

// ProblemTypePrefix starts the type URI of every Airlock problem document;
// the rest is the problem's slug (e.g. "unknown-language").
const ProblemTypePrefix = problem.TypePrefix

// ProblemSlug returns the slug of a problem type URI: "unknown-language"
// for "/problems/unknown-language", and for "urn:airlock:problem:unknown-language"
// (servers before API 1.1.0); "" for a type that is not Airlock's.
func ProblemSlug(typ string) string { return problem.Slug(typ) }

// Error is an API error: a non-2xx response, decoded from its RFC 9457
// problem document when it has one. It unwraps to an *airlock.Error with
// the same code, so airlock.ErrorCode(err) works on it.
type Error struct {
	Status int    // HTTP status of the response
	Type   string // problem type URI, e.g. "/problems/unknown-language"
	Title  string
	Detail string
	Code   string // airlock error code, e.g. airlock.ENOTFOUND
	// RetryAfter is when the server says a retry may succeed, from the
	// response's Retry-After header (seconds or an HTTP date); 0 if it
	// sent none.
	RetryAfter time.Duration
	// Extensions are the problem's further members (RFC 9457, section
	// 3.2): a quota problem's "quota", "limit", "used" and "unit", for
	// example (numbers are float64, as encoding/json reads them).
	Extensions map[string]any
	// Refusal is set for a problem guard-blocked: the guard's findings
	// and the execution that records the refusal.
	Refusal *airlock.GuardRefusal
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("airlock: ")
	b.WriteString(printable(e.Title))
	if e.Detail != "" && e.Detail != e.Title {
		b.WriteString(": ")
		b.WriteString(printable(e.Detail))
	}
	fmt.Fprintf(&b, " (HTTP %d, %s)", e.Status, printable(e.Code))
	return b.String()
}

// Unwrap returns the domain error: the code, the problem's slug as Type and
// the detail (or the title if there is none) as Message.
func (e *Error) Unwrap() error {
	msg := e.Detail
	if msg == "" {
		msg = e.Title
	}
	slug := problem.Slug(e.Type)
	return &airlock.Error{Code: e.Code, Type: slug, Message: msg, RetryAfter: e.RetryAfter, Extensions: e.Extensions, Refusal: e.Refusal}
}

// problemError turns a non-2xx response into an *Error, reading at most
// MaxProblemBytes of the body. A body that is not a problem document, or a
// problem without a known code, still gives an *Error, with a code derived
// from the status.
func problemError(resp *http.Response) *Error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, MaxProblemBytes+1))
	drain(resp.Body)
	e := &Error{Status: resp.StatusCode, RetryAfter: problem.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	var p problem.Problem
	if len(data) <= MaxProblemBytes && isJSONType(resp.Header.Get("Content-Type")) &&
		json.Unmarshal(data, &p) == nil {
		e.Type, e.Title, e.Detail, e.Code = p.Type, p.Title, p.Detail, p.Code
		e.Extensions = p.Extensions
		if len(p.Findings) > 0 || p.ExecutionID != "" {
			e.Refusal = &airlock.GuardRefusal{Findings: p.Findings, ExecutionID: p.ExecutionID}
		}
	} else if s := strings.TrimSpace(snippet(data, 200)); s != "" {
		e.Detail = "unexpected " + resp.Header.Get("Content-Type") + " body: " + s
	}
	if e.Title == "" {
		e.Title = http.StatusText(resp.StatusCode)
		if e.Title == "" {
			e.Title = fmt.Sprintf("HTTP %d", resp.StatusCode)
		}
	}
	if !airlock.KnownCode(e.Code) {
		e.Code = problem.CodeFor(resp.StatusCode)
	}
	return e
}
