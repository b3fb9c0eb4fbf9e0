package agent

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/airlockhq/airlock/agent/protocol"
)

// Retained programs (protocol.ExecRequest.RetainBytes): they outlive the
// connection that started them, keep the start of their output and their
// exit status, and are read again with protocol.OpAttach. Once a stream
// has been sent a program's exit, the agent forgets it.

// retainedTable holds the retained programs that are running or whose
// exit no stream has received, by PID.
type retainedTable struct {
	mu   sync.Mutex
	m    map[int]*program
	done []*program // ended, unreported, oldest first; at most MaxRetained
}

func newRetainedTable() *retainedTable { return &retainedTable{m: map[int]*program{}} }

// add tracks a program that just started. An ended one under the same
// PID (the PID was reused) is dropped: a PID names one program.
func (t *retainedTable) add(p *program) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.m[p.pid]; old != nil {
		t.dropEnded(old)
	}
	t.m[p.pid] = p
}

func (t *retainedTable) get(pid int) *program {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[pid]
}

// ended notes a program that ended with no stream to report to. Beyond
// MaxRetained such programs, the oldest are forgotten.
func (t *retainedTable) ended(p *program) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[p.pid] != p {
		return // already reported (by an attach) or replaced
	}
	t.done = append(t.done, p)
	for len(t.done) > protocol.MaxRetained {
		old := t.done[0]
		t.done = t.done[1:]
		if t.m[old.pid] == old {
			delete(t.m, old.pid)
		}
	}
}

// remove forgets a program whose exit was delivered.
func (t *retainedTable) remove(p *program) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[p.pid] == p {
		delete(t.m, p.pid)
	}
	t.dropEnded(p)
}

// dropEnded removes p from the ended list. Called with mu held.
func (t *retainedTable) dropEnded(p *program) {
	if i := slices.Index(t.done, p); i >= 0 {
		t.done = slices.Delete(t.done, i, i+1)
	}
}

// listBudget is how many bytes of encoded entries a processes response
// may hold: it must fit in one frame.
const listBudget = protocol.MaxPayload - 1024

// list describes the programs, oldest first: at most MaxProcessList, and
// no more than fit in one frame. more says whether the list was cut.
func (t *retainedTable) list() (infos []protocol.ProcessInfo, more bool) {
	t.mu.Lock()
	progs := make([]*program, 0, len(t.m))
	for _, p := range t.m {
		progs = append(progs, p)
	}
	t.mu.Unlock()
	infos = make([]protocol.ProcessInfo, 0, len(progs))
	for _, p := range progs {
		p.mu.Lock()
		if !p.reported {
			infos = append(infos, protocol.ProcessInfo{
				PID:         p.pid,
				Argv0:       p.argv0,
				StartedAtMS: p.started.UnixMilli(),
				TimeoutMS:   p.timeoutMS,
				Running:     !p.ended,
				Attached:    p.sink != nil,
				Tag:         p.tag,
				PTY:         p.tty.size(),
			})
		}
		p.mu.Unlock()
	}
	slices.SortFunc(infos, func(a, b protocol.ProcessInfo) int {
		return cmp.Or(cmp.Compare(a.StartedAtMS, b.StartedAtMS), cmp.Compare(a.PID, b.PID))
	})
	if len(infos) > protocol.MaxProcessList {
		infos, more = infos[:protocol.MaxProcessList], true
	}
	size := 0
	for i := range infos {
		size += len(protocol.Encode(infos[i])) + 1
		if size > listBudget {
			return infos[:i], true
		}
	}
	return infos, more
}

// attach starts reading a retained program on stream: its retained output
// (of stdout, what follows the first offset bytes), then its live output
// and its exit. With stdin the stream also takes the program's terminal
// input and resizes.
func (s *server) attach(stream uint32, req *protocol.Request) {
	p := s.retained.get(req.PID)
	if p == nil {
		s.sendError(stream, "not_found", fmt.Errorf("no retained program with pid %d", req.PID))
		return
	}
	if req.Stdin && p.tty == nil {
		s.sendError(stream, "invalid", fmt.Errorf("program %d has no terminal: an attach takes the input of a terminal only", req.PID))
		return
	}
	h := &procStream{s: s, stream: stream, p: p, exec: req.Stdin}
	s.setHandler(stream, h) // signals are taken from now on
	go s.replay(h, req.Offset)
}

// detach stops sending a retained program on the stream of this
// connection that reads it; it runs on, keeping its output, for an
// attach. A program read by no stream of this connection is left alone.
func (s *server) detach(stream uint32, pid int) {
	p := s.retained.get(pid)
	if p == nil {
		s.sendError(stream, "not_found", fmt.Errorf("no retained program with pid %d", pid))
		return
	}
	p.mu.Lock()
	if h := p.sink; h != nil && h.s == s {
		p.sink = nil
		s.clearHandler(h.stream, h)
	}
	p.mu.Unlock()
	s.respond(stream, protocol.Response{PID: pid})
}

// replay sends what an attach stream gets, and makes it the program's
// reader if the program is still running. The program's lock is held
// throughout, so no output is lost or sent twice in between. Of stdout
// it sends what follows the first offset bytes, as far as it holds them.
func (s *server) replay(h *procStream, offset int64) {
	p := h.p
	p.mu.Lock()
	if p.reported { // its exit went to another stream meanwhile
		p.mu.Unlock()
		s.clearHandler(h.stream, h)
		s.sendError(h.stream, "not_found", fmt.Errorf("no retained program with pid %d", p.pid))
		return
	}
	old := p.sink
	p.sink = nil
	// p.stdout holds stdout from byte first on: the first bytes when it
	// keeps the start, the last ones when it keeps the tail. Past its
	// end, the next byte sent is the next one the program writes.
	first := int64(0)
	if p.tail {
		first = p.stdoutTotal - int64(len(p.stdout))
	}
	from := max(offset, first)
	var stdout []byte
	if end := first + int64(len(p.stdout)); from < end {
		stdout = p.stdout[from-first:]
	} else {
		from = max(from, p.stdoutTotal)
	}
	ok := s.respond(h.stream, protocol.Response{PID: p.pid, Offset: from}) == nil &&
		s.sendAll(protocol.TStdout, h.stream, stdout) == nil &&
		s.sendAll(protocol.TStderr, h.stream, p.stderr) == nil
	switch {
	case ok && p.ended:
		s.clearHandler(h.stream, h)
		if s.send(protocol.Frame{Type: protocol.TExit, Stream: h.stream, Payload: protocol.Encode(p.status)}) == nil {
			p.reported = true
		}
	case ok && !s.isDone():
		// If the connection ends from now on, its abort detaches h.
		p.sink = h
	default:
		s.clearHandler(h.stream, h)
	}
	reported := p.reported
	p.mu.Unlock()
	if reported {
		s.retained.remove(p)
	}
	if old != nil {
		old.takenOver()
	}
}
