package airlock

import (
	"errors"
	"fmt"
	"time"
)

// Error codes. Each maps to one HTTP status (the table is in
// internal/problem, used by the servers and the client alike) and to a
// stable problem type.
const (
	ECONFLICT       = "conflict"
	EINTERNAL       = "internal"
	EINVALID        = "invalid"
	ENOTFOUND       = "not_found"
	EUNAUTHORIZED   = "unauthorized"
	EFORBIDDEN      = "forbidden"
	ETOOLARGE       = "too_large"
	EUNAVAILABLE    = "unavailable"
	ENOTIMPLEMENTED = "not_implemented"
	ERATELIMITED    = "rate_limited"
	EUNPROCESSABLE  = "unprocessable" // well-formed but refused, e.g. an idempotency key reused with another body
)

// KnownCode reports whether code is one of the error codes above.
func KnownCode(code string) bool {
	switch code {
	case ECONFLICT, EINTERNAL, EINVALID, ENOTFOUND, EUNAUTHORIZED, EFORBIDDEN,
		ETOOLARGE, EUNAVAILABLE, ENOTIMPLEMENTED, ERATELIMITED, EUNPROCESSABLE:
		return true
	}
	return false
}

// Error is the one domain error. Code is machine-readable; Message is safe
// to show to the API client. Internal details go in the wrapped Err, which
// is logged but never sent to a client.
type Error struct {
	Code    string
	Type    string // optional finer problem type, e.g. "unknown-language"
	Message string
	// RetryAfter, when set, tells the client when to try again (the
	// Retry-After header of a 429 or 503 problem).
	RetryAfter time.Duration
	// Extensions are further members of the problem document sent for
	// the error (RFC 9457, section 3.2), e.g. the quota a request went
	// past and its limit. Values must encode as JSON; names must not be
	// those of the standard members (type, title, status, detail,
	// instance) or "code", which are dropped.
	Extensions map[string]any
	// Refusal, when set, is the guard's refusal of code (extension
	// members of the problem guard-blocked).
	Refusal *GuardRefusal
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("airlock: %s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("airlock: %s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Problem returns an *Error with a finer problem type.
func Problem(code, typ, format string, args ...any) *Error {
	return &Error{Code: code, Type: typ, Message: fmt.Sprintf(format, args...)}
}

// RetryLater returns a copy of e that asks the client to retry after d.
func (e *Error) RetryLater(d time.Duration) *Error {
	c := *e
	c.RetryAfter = d
	return &c
}

// With returns a copy of e with the extension member name set to v.
func (e *Error) With(name string, v any) *Error {
	c := *e
	c.Extensions = make(map[string]any, len(e.Extensions)+1)
	for k, x := range e.Extensions {
		c.Extensions[k] = x
	}
	c.Extensions[name] = v
	return &c
}

// ExtensionsOf returns the extension members of the first *Error in
// err's chain that has any, or nil.
func ExtensionsOf(err error) map[string]any {
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return nil
		}
		if len(e.Extensions) > 0 {
			return e.Extensions
		}
		err = e.Err
	}
	return nil
}

// RetryAfterOf returns the RetryAfter of the first *Error in err's chain
// that sets one, or 0.
func RetryAfterOf(err error) time.Duration {
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return 0
		}
		if e.RetryAfter > 0 {
			return e.RetryAfter
		}
		err = e.Err
	}
	return 0
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL
// for any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the client-safe message of err.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// Sentinel errors used across packages; wrap them with %w.
var (
	ErrNotFound      = &Error{Code: ENOTFOUND, Message: "not found"}
	ErrUnauthorized  = &Error{Code: EUNAUTHORIZED, Type: "unauthorized", Message: "missing or invalid API key"}
	ErrSandboxGone   = errors.New("sandbox is gone")
	ErrAgentProtocol = errors.New("agent protocol violation")
)
