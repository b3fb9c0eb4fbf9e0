package rest

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
)

// watchStateEvery is how often a quiet watch checks that its session is
// still live.
const watchStateEvery = 5 * time.Second

// watchEvent is a session event on the wire: output as UTF-8 text (data)
// or, for other bytes, base64 (data_b64). A character may be split
// between two chunks of one stream; a client decodes each run's streams
// as byte streams.
type watchEvent struct {
	airlock.SessionEvent
	Data    string `json:"data,omitempty"`
	DataB64 string `json:"data_b64,omitempty"`
}

func wireEvent(ev airlock.SessionEvent) watchEvent {
	w := watchEvent{SessionEvent: ev}
	if len(ev.Data) > 0 {
		if utf8.Valid(ev.Data) {
			w.Data = string(ev.Data)
		} else {
			w.DataB64 = base64.StdEncoding.EncodeToString(ev.Data)
		}
	}
	return w
}

// sessionOutput streams a session's live output: GET
// /v1/sessions/{id}/output. Server-sent events: watching {session_id}
// first, then start, stdout, stderr and end of every exec and cell run in
// the session (those under way at the start replayed from what was kept
// of them), and closed {state, end_reason} when the session ends, or
// error with a problem (watch-dropped) when the client fell behind.
func (s *Server) sessionOutput(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	wt, ok := svc.(airlock.SessionWatcher)
	if !ok {
		s.error(w, r, errorf(airlock.ENOTIMPLEMENTED, "watch-disabled", "sessions on this server cannot be watched"))
		return
	}
	tenant, id := TenantFrom(r.Context()), r.PathValue("id")
	feed, err := wt.WatchSession(r.Context(), tenant, id)
	if err != nil {
		s.error(w, r, err)
		return
	}
	defer feed.Close()
	// A watch lasts as long as the session; each write has its own
	// deadline instead.
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	st := s.newEventStream(w)
	defer st.drop(errStreamEnded)
	start := map[string]any{"session_id": id}
	st.begin("watching", start)
	// The watch ends when the client goes away or its stream is dropped.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-st.dropped:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		nctx, ncancel := context.WithTimeout(ctx, watchStateEvery)
		ev, err := feed.Next(nctx)
		ncancel()
		if err == nil {
			st.enqueue(encodeEvent(ev.Type, wireEvent(ev)), true)
			continue
		}
		if ctx.Err() != nil {
			if reason := st.droppedErr(); reason != nil && slowClient(reason) {
				s.log.Warn("session watch dropped: the client did not keep up", "request_id", info(r.Context()).id, "reason", reason.Error())
			}
			panic(http.ErrAbortHandler) // the client went away, or its stream was cut
		}
		if errors.Is(err, context.DeadlineExceeded) {
			sess, serr := svc.Session(ctx, tenant, id)
			if serr == nil && sess.State.Live() {
				continue
			}
		}
		if airlock.ErrorCode(err) == airlock.EUNAVAILABLE { // dropped, or the server stops
			st.end("watching", start, "error", streamProblem(err))
		} else {
			end := map[string]any{"session_id": id}
			if sess, serr := svc.Session(ctx, tenant, id); serr == nil {
				end["state"], end["end_reason"] = sess.State, sess.EndReason
			}
			st.end("watching", start, "closed", end)
		}
		if st.droppedErr() != nil {
			panic(http.ErrAbortHandler)
		}
		return
	}
}
