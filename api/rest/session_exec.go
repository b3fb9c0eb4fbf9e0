package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlockhq/airlock"
)

// sessionExec runs a command in a session: POST /v1/sessions/{id}/exec.
// The answer is the execution (the shape of /v1/execute), or with
// Accept: text/event-stream a stream of events as it runs: start
// {execution_id, pid}, stdout and stderr chunks, and exit with the
// execution (or error with a problem). A stream the client does not keep
// up with is dropped (see sse.go); the command runs on to its end and is
// recorded as usual.
func (s *Server) sessionExec(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	var req airlock.SessionExecRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	tenant, id := TenantFrom(r.Context()), r.PathValue("id")
	// A command may run longer than the server's write timeout; a stream
	// sets a deadline on each of its writes instead.
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	if !wantsEventStream(r) {
		e, err := svc.Exec(r.Context(), tenant, id, req, nil)
		if err != nil {
			s.error(w, r, err)
			return
		}
		s.writeJSON(w, r, http.StatusOK, e)
		return
	}
	// Problems found before the program starts are still plain problem
	// responses; the stream begins with the start event.
	st := s.newEventStream(w)
	defer st.drop(errStreamEnded)
	v, cut, err := s.streamed(r, st, func(ctx context.Context) (any, error) {
		return svc.Exec(ctx, tenant, id, req, execObserver{st})
	})
	if cut {
		panic(http.ErrAbortHandler)
	}
	if !st.started() && err != nil {
		s.error(w, r, err)
		return
	}
	e, _ := v.(*airlock.Execution)
	// A program that ended before it was seen starts its stream here.
	start := map[string]any{"execution_id": "", "pid": 0}
	if e != nil {
		start["execution_id"] = e.ID
	}
	if err != nil {
		p := streamProblem(err)
		s.log.Warn("session exec failed mid-stream", "request_id", info(r.Context()).id, "error", err.Error())
		st.end("start", start, "error", p)
	} else {
		st.end("start", start, "exit", e)
	}
	if st.droppedErr() != nil {
		s.streamDropped(r, st, false)
		panic(http.ErrAbortHandler)
	}
}

// execObserver feeds an exec's events to its stream. Output that arrives
// before the start event (the agent may send it before the exec's PID is
// known here) waits in the stream's queue behind it, so start is always
// first.
type execObserver struct{ st *eventStream }

func (o execObserver) Started(executionID string, pid int) {
	o.st.begin("start", map[string]any{"execution_id": executionID, "pid": pid})
}
func (o execObserver) Stdout(b []byte) { o.st.output("stdout", b) }
func (o execObserver) Stderr(b []byte) { o.st.output("stderr", b) }

// SignalRequest is the body of POST /v1/sessions/{id}/exec/{pid}/signal:
// a signal number, or a name with or without SIG ("TERM", "SIGINT").
type SignalRequest struct {
	Signal json.RawMessage `json:"signal"`
}

// signalNames are the signals a client may name.
var signalNames = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "PIPE": syscall.SIGPIPE, "ALRM": syscall.SIGALRM,
	"TERM": syscall.SIGTERM, "CONT": syscall.SIGCONT, "STOP": syscall.SIGSTOP, "TSTP": syscall.SIGTSTP,
	"WINCH": syscall.SIGWINCH,
}

// parseSignal reads a signal number or name.
func parseSignal(raw json.RawMessage) (int, error) {
	bad := errorf(airlock.EINVALID, "invalid-signal", `signal must be a number from 1 to 64 or a name such as "TERM", "INT" or "KILL"`)
	if len(raw) == 0 {
		return 0, bad
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		if n < 1 || n > 64 {
			return 0, bad
		}
		return n, nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return 0, bad
	}
	sig, ok := signalNames[strings.TrimPrefix(strings.ToUpper(name), "SIG")]
	if !ok {
		return 0, bad
	}
	return int(sig), nil
}

// signalExec delivers a signal to a running exec's process group:
// POST /v1/sessions/{id}/exec/{pid}/signal. 204 once it is sent.
func (s *Server) signalExec(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	var req SignalRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	sig, err := parseSignal(req.Signal)
	if err != nil {
		s.error(w, r, err)
		return
	}
	pid, err := strconv.Atoi(r.PathValue("pid"))
	if err != nil || pid < 1 {
		s.error(w, r, errorf(airlock.ENOTFOUND, "process-not-found", "no exec with pid %q is running", r.PathValue("pid")))
		return
	}
	if err := svc.SignalExec(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), pid, sig); err != nil {
		s.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
