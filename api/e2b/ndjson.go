package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"
)

// ndjson streams JSON lines to a client without ever making the producer
// wait (the producer is the session's agent connection): lines queue in
// memory, at most maxQueuedBytes, and a writer goroutine sends them, each
// write within streamWriteTimout. A client that falls further behind, or
// stops reading, is treated as gone: cancel is called (a cell is then
// interrupted, as when the client disconnects).
type ndjson struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	cancel context.CancelFunc

	mu      sync.Mutex
	q       [][]byte
	bytes   int
	started bool // a line was queued: the response has begun
	closed  bool
	failed  error
	wake    chan struct{}
	done    chan struct{}
}

var errSlowClient = errors.New("the client read the stream too slowly")

func newNDJSON(w http.ResponseWriter, cancel context.CancelFunc) *ndjson {
	n := &ndjson{w: w, rc: http.NewResponseController(w), cancel: cancel, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go n.loop()
	return n
}

// send queues one line.
func (n *ndjson) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	b = append(b, '\n')
	n.mu.Lock()
	switch {
	case n.closed || n.failed != nil:
	case n.bytes+len(b) > maxQueuedBytes:
		n.failed = errSlowClient
		n.cancel()
	default:
		n.q = append(n.q, b)
		n.bytes += len(b)
		n.started = true
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// begun reports whether the response has begun.
func (n *ndjson) begun() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.started
}

// close sends what is queued and ends the writer.
func (n *ndjson) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	<-n.done
}

func (n *ndjson) loop() {
	defer close(n.done)
	header := false
	for {
		<-n.wake
		for {
			n.mu.Lock()
			q, closed, failed := n.q, n.closed, n.failed
			n.q, n.bytes = nil, 0
			n.mu.Unlock()
			if failed != nil {
				return
			}
			if len(q) == 0 {
				if closed {
					return
				}
				break
			}
			if !header {
				h := n.w.Header()
				h.Set("Content-Type", "application/x-ndjson")
				h.Set("Cache-Control", "no-store")
				h.Set("X-Content-Type-Options", "nosniff")
				n.rc.SetWriteDeadline(time.Now().Add(streamWriteTimout))
				n.w.WriteHeader(http.StatusOK)
				header = true
			}
			for _, b := range q {
				n.rc.SetWriteDeadline(time.Now().Add(streamWriteTimout))
				if _, err := n.w.Write(b); err != nil {
					n.fail(err)
					return
				}
			}
			n.rc.SetWriteDeadline(time.Now().Add(streamWriteTimout))
			if err := n.rc.Flush(); err != nil {
				n.fail(err)
				return
			}
		}
	}
}

func (n *ndjson) fail(err error) {
	n.mu.Lock()
	if n.failed == nil {
		n.failed = err
	}
	n.mu.Unlock()
	n.cancel()
}

// textStream turns output chunks into text without splitting a UTF-8
// sequence between two lines: an incomplete one at the end of a chunk
// waits for the next.
type textStream struct{ carry []byte }

func (t *textStream) text(b []byte) string {
	b = append(t.carry, b...)
	t.carry = nil
	// Hold back at most 3 bytes of a sequence that may go on.
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				t.carry = append([]byte(nil), b[i:]...)
				b = b[:i]
			}
			break
		}
	}
	return string(b)
}

func (t *textStream) flush() string {
	s := string(t.carry)
	t.carry = nil
	return s
}
