package rest

import (
	"net/http"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/problem"
)

// The REST API's error responses are internal/problem's documents; the
// names below are kept for the API's users and its OpenAPI document.
const (
	// ProblemContentType is the media type of every error response
	// (RFC 9457).
	ProblemContentType = problem.ContentType
	// ProblemTypePrefix starts every problem type URI; the rest is a
	// stable slug.
	ProblemTypePrefix = problem.TypePrefix
	// RetryAfterMember carries, in whole seconds, the Retry-After of an
	// event stream's error event.
	RetryAfterMember = problem.RetryAfterMember
)

// Problem is an RFC 9457 problem document (see internal/problem).
type Problem = problem.Problem

// StatusFor returns the HTTP status of an airlock error code (the one
// table, in internal/problem); 500 for a code it does not know.
func StatusFor(code string) int { return problem.Status(code) }

// ErrorFromProblem maps a problem document back to the domain error; nil
// for a nil problem.
func ErrorFromProblem(p *Problem) *airlock.Error { return p.AsError() }

// DecodeProblem returns the error an HTTP response stands for (see
// problem.Decode).
func DecodeProblem(resp *http.Response) error { return problem.Decode(resp) }

// RetryAfterSeconds renders d as the value of a Retry-After header.
func RetryAfterSeconds(d time.Duration) string { return problem.RetryAfterSeconds(d) }

// newProblem builds a problem document; status 0 means StatusFor(code).
func newProblem(code, typ string, status int, detail string) *Problem {
	return problem.New(code, typ, status, detail)
}

// problemFor turns an error into the problem sent to the client; see
// problem.For.
func problemFor(err error) (p *Problem, internal bool) { return problem.For(err) }

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
