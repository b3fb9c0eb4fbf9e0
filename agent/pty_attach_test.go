package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
)

// TestPTYDetachAttach: a retained program on a terminal, detached from
// the stream that started it and left by its host, runs on with its
// terminal open; a new host finds it listed with its terminal's size and
// attaches it with an offset: it gets only what the first host did not
// have, then types into it and resizes it, until it exits.
func TestPTYDetachAttach(t *testing.T) {
	h := startChannel(t)
	first := newLiveBuffer()
	p, err := h.c.Exec(h.ctx(5*time.Second), protocol.ExecRequest{
		Argv: []string{"sh", "-c", "stty -echo; echo before; while [ ! -e go ]; do sleep 0.02; done; echo during; " +
			"read a; echo after-$a; read b; stty size; read c; exit 3"},
		PTY: &airlock.PTYSize{Cols: 80, Rows: 24}, RetainBytes: 1 << 10, Tag: "pty-test",
	}, first, nil)
	if err != nil {
		t.Fatal(err)
	}
	first.waitFor(t, "before\r\n", 5*time.Second)
	held := int64(len("before\r\n")) // all it writes until go exists
	if err := h.c.Detach(h.ctx(5*time.Second), p.PID()); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	if err := h.c.Detach(h.ctx(5*time.Second), 999999); remoteCode(t, err) != "not_found" {
		t.Fatalf("Detach of no program: %v", err)
	}
	// It writes "during" while no stream reads it.
	os.WriteFile(filepath.Join(h.ws, "go"), nil, 0o644)
	h.reconnect()
	ps := h.processes()
	if len(ps) != 1 || ps[0].PID != p.PID() || ps[0].Tag != "pty-test" || ps[0].PTY == nil ||
		*ps[0].PTY != (airlock.PTYSize{Cols: 80, Rows: 24}) || ps[0].Attached || !ps[0].Running {
		t.Fatalf("processes %+v", ps)
	}

	out := newLiveBuffer()
	q, from, err := h.c.AttachTerminal(h.ctx(5*time.Second), p.PID(), held, out)
	if err != nil {
		t.Fatalf("AttachTerminal: %v", err)
	}
	if from != held {
		t.Fatalf("attach sends from %d, want %d", from, held)
	}
	out.waitFor(t, "during\r\n", 5*time.Second)
	q.Write([]byte("x\n"))
	out.waitFor(t, "after-x", 5*time.Second)
	if err := q.(airlock.Resizer).Resize(100, 30); err != nil {
		t.Fatal(err)
	}
	q.Write([]byte("\n"))
	out.waitFor(t, "30 100", 5*time.Second)
	if ps := h.processes(); len(ps) != 1 || ps[0].PTY == nil || *ps[0].PTY != (airlock.PTYSize{Cols: 100, Rows: 30}) || !ps[0].Attached {
		t.Fatalf("processes after the resize %+v", ps)
	}
	q.Write([]byte("\n"))
	st, err := q.Wait(h.ctx(5 * time.Second))
	if err != nil || st.Code != 3 {
		t.Fatalf("exit %+v, %v", st, err)
	}
	out.mu.Lock()
	got := out.buf.String()
	out.mu.Unlock()
	if strings.Contains(got, "before") {
		t.Fatalf("the attach resent what the host held: %q", got)
	}
}

// TestPTYRetainsTail: a program on a terminal keeps the last RetainBytes
// of its output (a terminal's scrollback), not the first; an attach from
// offset 0 says where what it sends starts. An attach that asks for the
// input of a program without a terminal is refused.
func TestPTYRetainsTail(t *testing.T) {
	h := startChannel(t)
	first := newLiveBuffer()
	p, err := h.c.Exec(h.ctx(5*time.Second), protocol.ExecRequest{
		Argv: []string{"sh", "-c", "stty -echo; printf 0123456789abcdefghij; read x"},
		PTY:  &airlock.PTYSize{Cols: 80, Rows: 24}, RetainBytes: 8,
	}, first, nil)
	if err != nil {
		t.Fatal(err)
	}
	first.waitFor(t, "ghij", 5*time.Second)
	h.reconnect()
	out := newLiveBuffer()
	q, from, err := h.c.AttachTerminal(h.ctx(5*time.Second), p.PID(), 0, out)
	if err != nil {
		t.Fatal(err)
	}
	if from != 12 {
		t.Fatalf("attach sends from %d, want 12", from)
	}
	out.waitFor(t, "cdefghij", 5*time.Second)
	q.Write([]byte("\n"))
	st, err := q.Wait(h.ctx(5 * time.Second))
	if err != nil || st.Code != 0 || st.StdoutDropped != 12 {
		t.Fatalf("exit %+v, %v", st, err)
	}
	out.mu.Lock()
	got := out.buf.String()
	out.mu.Unlock()
	if got != "cdefghij" {
		t.Fatalf("attach got %q, want the last 8 bytes", got)
	}

	plain := h.exec(protocol.ExecRequest{Argv: []string{"sh", "-c", "read x"}, Stdin: true, RetainBytes: 64})
	_, _, err = h.c.AttachTerminal(h.ctx(5*time.Second), plain.p.PID(), 0, nil)
	if code := remoteCode(t, err); code != "invalid" {
		t.Fatalf("terminal attach of a program without one: %s", code)
	}
	plain.p.CloseStdin()
	plain.wait(5 * time.Second)
}
