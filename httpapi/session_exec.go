package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlockhq/airlock"
)

// sessionExec runs a command in a session: POST /v1/sessions/{id}/exec.
// The answer is the execution (the shape of /v1/execute), or with
// Accept: text/event-stream a stream of events as it runs: start
// {execution_id, pid}, stdout and stderr chunks, and exit with the
// execution (or error with a problem).
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
	// A command may run longer than the server's write timeout.
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
	obs := &execStream{s: s, w: w, r: r}
	e, err := svc.Exec(r.Context(), tenant, id, req, obs)
	if !obs.begun() {
		if err != nil {
			s.error(w, r, err)
			return
		}
		obs.Started(e.ID, 0) // a program that ended before it was seen
	}
	obs.sse.finish()
	if err != nil {
		p, _ := problemFor(err)
		s.log.Warn("session exec failed mid-stream", "request_id", info(r.Context()).id, "error", err.Error())
		obs.sse.event("error", p)
	} else {
		obs.sse.event("exit", e)
	}
	obs.sse.close()
}

// execStream is the event stream of one exec. Output that arrives before
// the start event (the agent may send it before the exec's PID is known
// here) waits for it, so start is always first.
type execStream struct {
	s   *Server
	w   http.ResponseWriter
	r   *http.Request
	mu  sync.Mutex
	sse *sseWriter
	// held is output received before the start event.
	held []heldChunk
}

type heldChunk struct {
	stream string
	data   []byte
}

func (x *execStream) begun() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.sse != nil
}

func (x *execStream) Started(executionID string, pid int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.sse != nil {
		return
	}
	x.sse = startEventStream(x.w)
	x.sse.event("start", map[string]any{"execution_id": executionID, "pid": pid})
	for _, c := range x.held {
		x.sse.output(c.stream, c.data)
	}
	x.held = nil
}

func (x *execStream) out(stream string, b []byte) {
	x.mu.Lock()
	if x.sse == nil {
		x.held = append(x.held, heldChunk{stream, append([]byte(nil), b...)})
		x.mu.Unlock()
		return
	}
	sse := x.sse
	x.mu.Unlock()
	sse.output(stream, b)
}

func (x *execStream) Stdout(b []byte) { x.out("stdout", b) }
func (x *execStream) Stderr(b []byte) { x.out("stderr", b) }

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
