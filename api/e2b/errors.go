package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"connectrpc.com/connect"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/problem"
)

// Errors go out in the shape each part of E2B's API has: {code, message}
// with the HTTP status as code on the control plane and the envd HTTP
// endpoints, Connect errors on the RPC services. Internal errors are
// logged and never echoed.

// apiError is an error with the HTTP status E2B's API would answer.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, msg string) error { return &apiError{status: status, msg: msg} }

// Problem types of the session service that mean the sandbox is not
// running (E2B: the sandbox was killed or timed out).
func sandboxGone(err error) bool {
	var ae *airlock.Error
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.Type {
	case "session-not-found", "session-ended", "session-unavailable":
		return true
	}
	return false
}

// httpStatus is the status and client-safe message of err, and whether
// it is internal (to be logged).
func httpStatus(err error) (int, string, bool) {
	var e *apiError
	if errors.As(err, &e) {
		return e.status, e.msg, false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return 499, "the request was canceled", false
	}
	var ae *airlock.Error
	if !errors.As(err, &ae) {
		return http.StatusInternalServerError, "internal error", true
	}
	status := problem.Status(ae.Code)
	switch ae.Type {
	case "disk-full", "file-too-large":
		status = http.StatusInsufficientStorage
	}
	return status, ae.Message, status == http.StatusInternalServerError
}

// writeError sends err as {code, message} (the control plane and the envd
// HTTP endpoints), with Retry-After when it says when to retry.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, msg, internal := httpStatus(err)
	if internal {
		s.log.LogAttrs(r.Context(), slog.LevelError, "e2b: internal error",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	}
	if status == 499 { // nobody reads it
		status = http.StatusBadRequest
	}
	if d := airlock.RetryAfterOf(err); d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((d+999_999_999)/1_000_000_000))))
	}
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code":500,"message":"internal error"}`)
	}
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// connectError turns err into the Connect error the SDKs expect.
func (s *Server) connectError(ctx context.Context, procedure string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	if sandboxGone(err) {
		return connect.NewError(connect.CodeUnavailable, errors.New(airlock.ErrorMessage(err)))
	}
	status, msg, internal := httpStatus(err)
	var code connect.Code
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		code = connect.CodeInvalidArgument
	case http.StatusUnauthorized:
		code = connect.CodeUnauthenticated
	case http.StatusForbidden:
		code = connect.CodePermissionDenied
	case http.StatusNotFound:
		code = connect.CodeNotFound
	case http.StatusConflict:
		code = connect.CodeFailedPrecondition
		var ae *airlock.Error
		if errors.As(err, &ae) && ae.Type == "file-exists" {
			code = connect.CodeAlreadyExists
		}
	case http.StatusRequestEntityTooLarge, http.StatusInsufficientStorage, http.StatusTooManyRequests:
		code = connect.CodeResourceExhausted
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		code = connect.CodeUnavailable
	case http.StatusNotImplemented:
		code = connect.CodeUnimplemented
	case 499:
		code = connect.CodeCanceled
	default:
		code = connect.CodeInternal
	}
	if internal {
		s.log.LogAttrs(ctx, slog.LevelError, "e2b: internal error", slog.String("procedure", procedure), slog.String("error", err.Error()))
	}
	return connect.NewError(code, errors.New(msg))
}
