package e2b

import (
	"sort"
	"sync"

	"github.com/airlockhq/airlock"
	pb "github.com/airlockhq/airlock/api/e2b/internal/envdpb/process"
)

// The processes this front-end started, by sandbox and PID, with their
// output fanned out to the streams that read them (the Start stream and
// any Connect). The session service runs them and records them; this is
// only the E2B view. A stream that falls behind by more than
// maxQueuedBytes is dropped; the process goes on.

const maxQueuedBytes = 4 << 20

type processTable struct {
	mu        sync.Mutex
	bySandbox map[string]map[int]*proc
}

func newProcessTable() *processTable {
	return &processTable{bySandbox: map[string]map[int]*proc{}}
}

func (t *processTable) add(p *proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.bySandbox[p.sandbox]
	if m == nil {
		m = map[int]*proc{}
		t.bySandbox[p.sandbox] = m
	}
	m[p.pid] = p
}

func (t *processTable) remove(p *proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := t.bySandbox[p.sandbox]; m != nil && m[p.pid] == p {
		delete(m, p.pid)
		if len(m) == 0 {
			delete(t.bySandbox, p.sandbox)
		}
	}
}

// find returns the sandbox's running process of a PID, or of a tag when
// pid is 0.
func (t *processTable) find(sandbox string, pid int, tag string) *proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.bySandbox[sandbox]
	if pid > 0 {
		return m[pid]
	}
	for _, p := range m {
		if tag != "" && p.tag == tag {
			return p
		}
	}
	return nil
}

func (t *processTable) list(sandbox string) []*proc {
	t.mu.Lock()
	out := make([]*proc, 0, len(t.bySandbox[sandbox]))
	for _, p := range t.bySandbox[sandbox] {
		out = append(out, p)
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

func (t *processTable) dropSandbox(sandbox string) {
	t.mu.Lock()
	delete(t.bySandbox, sandbox)
	t.mu.Unlock()
}

// proc is one process: its config as E2B gave it, and its output.
type proc struct {
	sandbox string
	tag     string
	config  *pb.ProcessConfig
	table   *processTable
	// pty and ptyID are set for a terminal (pty.go).
	pty   airlock.PTYAttachment
	ptyID string

	started  chan struct{} // closed once pid is set, or startErr
	pid      int
	startErr error

	mu   sync.Mutex
	subs map[*subscriber]bool
	end  *pb.ProcessEvent_EndEvent
	done chan struct{}
}

func newProc(t *processTable, sandbox, tag string, cfg *pb.ProcessConfig) *proc {
	return &proc{sandbox: sandbox, tag: tag, config: cfg, table: t,
		started: make(chan struct{}), subs: map[*subscriber]bool{}, done: make(chan struct{})}
}

// Started, Stdout and Stderr make proc the airlock.ExecObserver of its
// run: they never block (the agent's connection waits for them).

func (p *proc) Started(executionID string, pid int) {
	p.pid = pid
	p.table.add(p)
	close(p.started)
}

func (p *proc) Stdout(b []byte) { p.publish(dataEvent(b, false)) }
func (p *proc) Stderr(b []byte) { p.publish(dataEvent(b, true)) }

func dataEvent(b []byte, stderr bool) *pb.ProcessEvent {
	b = append([]byte(nil), b...)
	d := &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Stdout{Stdout: b}}
	if stderr {
		d.Output = &pb.ProcessEvent_DataEvent_Stderr{Stderr: b}
	}
	return &pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: d}}
}

func (p *proc) publish(ev *pb.ProcessEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.subs {
		s.push(ev)
	}
}

// startFailed ends a process that never started.
func (p *proc) startFailed(err error) {
	p.startErr = err
	close(p.started)
	p.finish(nil)
}

// finish records the end and wakes every reader. The process leaves the
// table first: a client that has read the end event never finds it
// listed.
func (p *proc) finish(end *pb.ProcessEvent_EndEvent) {
	p.table.remove(p)
	p.mu.Lock()
	p.end = end
	close(p.done)
	for s := range p.subs {
		s.wakeUp()
	}
	p.mu.Unlock()
}

// subscribe adds a reader of the output from now on.
func (p *proc) subscribe() *subscriber {
	s := &subscriber{wake: make(chan struct{}, 1)}
	p.mu.Lock()
	p.subs[s] = true
	p.mu.Unlock()
	return s
}

func (p *proc) unsubscribe(s *subscriber) {
	p.mu.Lock()
	delete(p.subs, s)
	p.mu.Unlock()
}

// subscriber is the queue of one stream.
type subscriber struct {
	mu      sync.Mutex
	q       []*pb.ProcessEvent
	bytes   int
	dropped bool
	wake    chan struct{}
}

func (s *subscriber) push(ev *pb.ProcessEvent) {
	n := len(ev.GetData().GetStdout()) + len(ev.GetData().GetStderr())
	s.mu.Lock()
	if s.dropped || s.bytes+n > maxQueuedBytes {
		s.dropped, s.q, s.bytes = true, nil, 0
	} else {
		s.q = append(s.q, ev)
		s.bytes += n
	}
	s.mu.Unlock()
	s.wakeUp()
}

func (s *subscriber) wakeUp() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns what is queued, and whether the stream fell too far
// behind.
func (s *subscriber) take() ([]*pb.ProcessEvent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.q
	s.q, s.bytes = nil, 0
	return q, s.dropped
}
