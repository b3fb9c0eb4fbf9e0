package rest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Server-sent events (text/event-stream) for streaming execs and cells.
// Each event is one JSON object on one data line. Output chunks are
// {"data": "..."} when they are UTF-8 text, else {"data_b64": "..."};
// a multi-byte character split between two reads is held back until it is
// whole, so text never turns into replacement characters on the way.
//
// The observer callbacks that feed a stream run on the goroutine that
// pumps the agent's frames, which every other call on the session shares,
// so they must never block: they only queue events, and one writer
// goroutine per stream sends them. The queue is bounded
// (Config.StreamBufferBytes) and every write has a deadline
// (Config.StreamWriteTimeout); a client that reads too slowly or not at
// all overflows the one or misses the other, and the stream is dropped:
// the response is cut and the program runs on to its end, recorded as
// usual.

// Defaults of the stream bounds in Config.
const (
	DefaultStreamBufferBytes  = 1 << 20
	DefaultStreamWriteTimeout = 30 * time.Second
)

// sseKeepAlive is how often a comment line keeps a quiet stream (and any
// proxy on the way) from timing out.
const sseKeepAlive = 15 * time.Second

// Why a stream was dropped.
var (
	errStreamOverflow = errors.New("the client did not keep up: too many events waiting")
	errClientGone     = errors.New("the client went away")
	errStreamEnded    = errors.New("the response is over")
)

// wantsEventStream reports whether the request's Accept header asks for
// text/event-stream.
func wantsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && mt == "text/event-stream" && params["q"] != "0" {
				return true
			}
		}
	}
	return false
}

// eventStream is the event stream of one response. Its methods are safe
// for concurrent use and never block on the client: events are queued and
// a writer goroutine, started by begin, sends them. Only that goroutine
// touches the ResponseWriter once the stream has begun, and it has
// returned before the handler does (wait).
type eventStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	max     int
	timeout time.Duration

	mu       sync.Mutex
	queue    []byte            // events not yet handed to the writer
	inFlight int               // bytes the writer is sending now
	partial  map[string][]byte // held-back bytes of an incomplete character, by event
	begun    bool              // the writer goroutine was started
	closing  bool              // the last event is queued
	halting  bool              // the writer is to stop after the write in progress
	dropErr  error             // why the stream was dropped; nil while it stands
	wake     chan struct{}     // a nudge for the writer (capacity 1)
	dropped  chan struct{}     // closed when the stream is dropped
	done     chan struct{}     // closed when the writer goroutine returns
}

// newEventStream returns a stream for w; nothing is written until begin.
func (s *Server) newEventStream(w http.ResponseWriter) *eventStream {
	return &eventStream{
		w:       w,
		rc:      http.NewResponseController(w),
		max:     s.cfg.StreamBufferBytes,
		timeout: s.cfg.StreamWriteTimeout,
		partial: map[string][]byte{},
		wake:    make(chan struct{}, 1),
		dropped: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// encodeEvent renders one event.
func encodeEvent(name string, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // only our own types: cannot happen
		b = []byte(`{}`)
	}
	out := make([]byte, 0, len(name)+len(b)+16)
	out = append(out, "event: "...)
	out = append(out, name...)
	out = append(out, "\ndata: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

// begin sends the response's headers and first the event name with v
// (ahead of anything queued before), then the rest as it comes. Later
// calls, and calls after the stream was dropped, do nothing.
func (st *eventStream) begin(name string, v any) {
	ev := encodeEvent(name, v)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.begun || st.dropErr != nil || st.closing {
		return
	}
	st.begun = true
	st.queue = append(ev, st.queue...)
	go st.run()
}

// started reports whether begin was called on a live stream.
func (st *eventStream) started() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.begun
}

// enqueue adds an event; capped says whether it counts against the
// bound (output does; the final events, bounded by the recorded result,
// do not). Past the bound the stream is dropped.
func (st *eventStream) enqueue(ev []byte, capped bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.dropErr != nil || st.closing {
		return
	}
	if capped && len(st.queue)+st.inFlight+len(ev) > st.max {
		st.dropLocked(errStreamOverflow)
		return
	}
	st.queue = append(st.queue, ev...)
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// chunk is the data of an output event.
type chunk struct {
	Data    string `json:"data,omitempty"`
	DataB64 string `json:"data_b64,omitempty"`
}

// output queues a chunk of a program's output as an event named stream.
func (st *eventStream) output(stream string, b []byte) {
	st.mu.Lock()
	if st.dropErr != nil || st.closing {
		st.mu.Unlock()
		return
	}
	data := append(st.partial[stream], b...)
	keep := incompleteTail(data)
	st.partial[stream] = append([]byte(nil), data[len(data)-keep:]...)
	data = data[:len(data)-keep]
	st.mu.Unlock()
	if ev := chunkEvent(stream, data); ev != nil {
		st.enqueue(ev, true)
	}
}

func chunkEvent(stream string, data []byte) []byte {
	if len(data) == 0 {
		return nil
	}
	if utf8.Valid(data) {
		return encodeEvent(stream, chunk{Data: string(data)})
	}
	return encodeEvent(stream, chunk{DataB64: base64.StdEncoding.EncodeToString(data)})
}

// end queues what is still held back of each stream and the final event,
// and waits until the writer has sent them (each write bounded by the
// write timeout) or the stream was dropped. It starts the stream with
// start if it has not begun.
func (st *eventStream) end(startName string, start any, name string, v any) {
	st.begin(startName, start)
	st.mu.Lock()
	partial := st.partial
	st.partial = map[string][]byte{}
	st.mu.Unlock()
	for _, stream := range []string{"stdout", "stderr"} {
		if ev := chunkEvent(stream, partial[stream]); ev != nil {
			st.enqueue(ev, false)
		}
	}
	st.enqueue(encodeEvent(name, v), false)
	st.mu.Lock()
	st.closing = true
	select {
	case st.wake <- struct{}{}:
	default:
	}
	st.mu.Unlock()
	st.wait()
}

// drop gives up on the stream: nothing more is queued or written, and a
// write in progress is cut short.
func (st *eventStream) drop(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.dropLocked(err)
}

func (st *eventStream) dropLocked(err error) {
	if st.dropErr != nil {
		return
	}
	st.dropErr = err
	st.queue = nil
	close(st.dropped)
	if st.begun {
		select {
		case <-st.done: // the writer is gone, and with it our use of w
		default:
			st.rc.SetWriteDeadline(time.Now()) // unblock a write in progress
		}
	}
}

// droppedErr returns why the stream was dropped, or nil.
func (st *eventStream) droppedErr() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.dropErr
}

// wait returns once the writer goroutine has returned (at once if the
// stream never began; after a drop it cannot begin any more).
func (st *eventStream) wait() {
	if st.started() {
		<-st.done
	}
}

// run is the writer goroutine: headers, then the queue as it fills, with
// a keep-alive comment when the stream is quiet, until the last event is
// written or the stream is dropped.
func (st *eventStream) run() {
	defer close(st.done)
	h := st.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	if !st.arm() {
		return
	}
	st.w.WriteHeader(http.StatusOK)
	if !st.written(st.rc.Flush()) {
		return
	}
	keepAlive := time.NewTimer(sseKeepAlive)
	defer keepAlive.Stop()
	for {
		st.mu.Lock()
		if st.dropErr != nil || st.halting {
			st.mu.Unlock()
			return
		}
		data := st.queue
		st.queue = nil
		closing := st.closing
		if len(data) > 0 {
			st.inFlight = len(data)
			st.rc.SetWriteDeadline(time.Now().Add(st.timeout))
		}
		st.mu.Unlock()
		if len(data) == 0 {
			if closing {
				return
			}
			select {
			case <-st.wake:
			case <-st.dropped:
			case <-keepAlive.C:
				st.enqueue([]byte(": keep-alive\n\n"), false)
				keepAlive.Reset(sseKeepAlive)
			}
			continue
		}
		_, err := st.w.Write(data)
		if err == nil {
			err = st.rc.Flush()
		}
		if !st.written(err) {
			return
		}
		keepAlive.Reset(sseKeepAlive)
	}
}

// arm sets the write deadline for the headers, unless the stream was
// dropped meanwhile.
func (st *eventStream) arm() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.dropErr != nil || st.halting {
		return false
	}
	st.inFlight = 1
	st.rc.SetWriteDeadline(time.Now().Add(st.timeout))
	return true
}

// written records the end of a write; a failed one drops the stream. It
// reports whether the writer may go on.
func (st *eventStream) written(err error) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.inFlight = 0
	if err != nil {
		st.dropLocked(fmt.Errorf("write: %w", err))
		return false
	}
	return true
}

// streamed runs call, which feeds st through its observer, on a goroutine
// of its own, with a context that the handler's return does not cancel.
// It returns call's result, or cut true when the handler must end the
// response at once (st is done with w then):
//   - the client did not keep up (the queue overflowed or a write missed
//     its deadline): the stream is dropped and call runs on to its end,
//     recording its result as usual;
//   - the client went away: call's context is canceled, as it would be
//     without a stream.
func (s *Server) streamed(r *http.Request, st *eventStream, call func(ctx context.Context) (any, error)) (v any, cut bool, err error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	type outcome struct {
		v   any
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer cancel()
		v, err := call(ctx)
		done <- outcome{v, err}
	}()
	select {
	case o := <-done:
		return o.v, false, o.err
	case <-st.dropped:
	case <-r.Context().Done():
		// A failed write cancels the request's context too: settle
		// tells a slow client from one that left.
	}
	if reason := st.settle(); slowClient(reason) {
		s.streamDropped(r, st, true)
	} else {
		cancel()
	}
	return nil, true, nil
}

// slowClient reports whether a stream was dropped because its client did
// not keep up, rather than because it went away.
func slowClient(reason error) bool {
	return errors.Is(reason, errStreamOverflow) || errors.Is(reason, os.ErrDeadlineExceeded)
}

// settle ends the stream's writing: a write in progress may finish or
// fail (within its deadline), none starts after it. It returns why the
// stream ended: the reason it was dropped for, or errClientGone if it was
// not dropped.
func (st *eventStream) settle() error {
	st.mu.Lock()
	st.halting = true
	writing := st.begun && st.inFlight > 0 && st.dropErr == nil
	st.mu.Unlock()
	if writing {
		<-st.done
	}
	st.mu.Lock()
	st.dropLocked(errClientGone) // unless dropped already
	reason := st.dropErr
	st.mu.Unlock()
	st.wait()
	return reason
}

// streamDropped logs why a stream was cut; running says whether its
// program runs on (else it had ended and only its last events were lost).
func (s *Server) streamDropped(r *http.Request, st *eventStream, running bool) {
	msg := "event stream dropped; the program runs on and its result is recorded"
	if !running {
		msg = "event stream dropped before its last event; the result is recorded"
	}
	s.log.LogAttrs(r.Context(), slog.LevelWarn, msg,
		slog.String("request_id", info(r.Context()).id),
		slog.String("path", r.URL.Path),
		slog.String("reason", st.droppedErr().Error()))
}

// incompleteTail returns how many bytes at the end of b are the start of
// a UTF-8 character that is not complete yet (0 to 3).
func incompleteTail(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c < 0x80 {
			return 0 // ASCII: nothing pending
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(b[len(b)-k:]) {
				return 0
			}
			return k
		}
	}
	return 0
}
