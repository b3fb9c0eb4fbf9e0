package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
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

// sseKeepAlive is how often a comment line keeps a quiet stream (and any
// proxy on the way) from timing out.
const sseKeepAlive = 15 * time.Second

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

// sseWriter writes events to a response. It is safe for concurrent use;
// after the client has gone its methods do nothing.
type sseWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	failed  bool
	pending map[string][]byte // held-back bytes of an incomplete character, by event
	stop    chan struct{}
	stopped sync.Once
}

// startEventStream sends the stream's headers and starts the keep-alive.
// Call close when done.
func startEventStream(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{}) // a stream lasts as long as its program
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: rc, pending: map[string][]byte{}, stop: make(chan struct{})}
	s.flush()
	go s.keepAlive()
	return s
}

func (s *sseWriter) keepAlive() {
	t := time.NewTicker(sseKeepAlive)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			s.write(": keep-alive\n\n")
			s.mu.Unlock()
		}
	}
}

// close stops the keep-alive; nothing is written afterwards.
func (s *sseWriter) close() {
	s.stopped.Do(func() { close(s.stop) })
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
}

// write sends text and flushes it (s.mu held).
func (s *sseWriter) write(text string) {
	if s.failed {
		return
	}
	if _, err := s.w.Write([]byte(text)); err != nil {
		s.failed = true
		return
	}
	s.flush()
}

func (s *sseWriter) flush() {
	if err := s.rc.Flush(); err != nil {
		s.failed = true
	}
}

// event sends one event with v as its JSON data.
func (s *sseWriter) event(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.write("event: " + name + "\ndata: " + string(b) + "\n\n")
}

// chunk is the data of an output event.
type chunk struct {
	Data    string `json:"data,omitempty"`
	DataB64 string `json:"data_b64,omitempty"`
}

// output sends a chunk of a program's output as an event named stream.
func (s *sseWriter) output(stream string, b []byte) {
	s.mu.Lock()
	data := append(s.pending[stream], b...)
	keep := incompleteTail(data)
	s.pending[stream] = append([]byte(nil), data[len(data)-keep:]...)
	data = data[:len(data)-keep]
	s.mu.Unlock()
	s.sendChunk(stream, data)
}

// finish sends what is still held back for each stream.
func (s *sseWriter) finish() {
	s.mu.Lock()
	pending := s.pending
	s.pending = map[string][]byte{}
	s.mu.Unlock()
	for _, stream := range []string{"stdout", "stderr"} {
		s.sendChunk(stream, pending[stream])
	}
}

func (s *sseWriter) sendChunk(stream string, data []byte) {
	if len(data) == 0 {
		return
	}
	if utf8.Valid(data) {
		s.event(stream, chunk{Data: string(data)})
	} else {
		s.event(stream, chunk{DataB64: base64.StdEncoding.EncodeToString(data)})
	}
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
