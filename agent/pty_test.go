package agent_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
)

// liveBuffer collects output that the test reads while it arrives.
type liveBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	ch  chan struct{} // closed and replaced on every write
}

func newLiveBuffer() *liveBuffer { return &liveBuffer{ch: make(chan struct{})} }

func (b *liveBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	close(b.ch)
	b.ch = make(chan struct{})
	return len(p), nil
}

// waitFor waits until the output contains s.
func (b *liveBuffer) waitFor(t *testing.T, s string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		b.mu.Lock()
		ok, ch := strings.Contains(b.buf.String(), s), b.ch
		b.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			b.mu.Lock()
			defer b.mu.Unlock()
			t.Fatalf("output never contained %q; got %q", s, b.buf.String())
		}
	}
}

func TestExecPTY(t *testing.T) {
	h := start(t)
	out := newLiveBuffer()
	p, err := h.c.Exec(h.ctx(5*time.Second), protocol.ExecRequest{
		Argv: []string{"/bin/sh"},
		PTY:  &airlock.PTYSize{Cols: 80, Rows: 24},
	}, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The program's stdin is a terminal of the asked size.
	p.Write([]byte("tty -s && echo is-a-tty; stty size\n"))
	out.waitFor(t, "is-a-tty", 5*time.Second)
	out.waitFor(t, "24 80", 5*time.Second)
	if err := p.(airlock.Resizer).Resize(132, 40); err != nil {
		t.Fatal(err)
	}
	p.Write([]byte("stty size\n"))
	out.waitFor(t, "40 132", 5*time.Second)
	// The terminal echoes what is typed, and a program's exit ends it.
	p.Write([]byte("exit 7\n"))
	st, err := p.Wait(h.ctx(5 * time.Second))
	if err != nil || st.Code != 7 {
		t.Fatalf("exit %+v, %v", st, err)
	}
	out.waitFor(t, "exit 7", time.Second)
}

func TestExecPTYBadSize(t *testing.T) {
	h := start(t)
	for _, size := range []airlock.PTYSize{{Cols: 0, Rows: 24}, {Cols: 80, Rows: 0}, {Cols: -1, Rows: 5}, {Cols: 80, Rows: protocol.MaxPTYCells + 1}} {
		_, err := h.c.Exec(h.ctx(5*time.Second), protocol.ExecRequest{Argv: []string{"/bin/sh"}, PTY: &size}, nil, nil)
		if err == nil {
			t.Errorf("size %+v accepted", size)
		}
	}
	h.healthy()
}
