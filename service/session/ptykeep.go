package session

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// Terminals across a pause, a fork's save and a restart: see the comment
// at the top of pty.go.

// suspendWithin bounds the detaching of a session's terminals.
const suspendWithin = 10 * time.Second

// suspendPTYs detaches the session's terminals from their streams in the
// agent, before its sandbox is checkpointed: their programs run on in
// the checkpoint, and no stream of the connection that ends with it is
// fed after the restore. A terminal that cannot be detached is lost with
// the pause (it ends when its stream does).
func (m *Manager) suspendPTYs(ctx context.Context, l *live) {
	sb := l.sb()
	if sb == nil {
		return
	}
	agent := sb.Agent()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), suspendWithin)
	defer cancel()
	for _, t := range l.ptys.list() {
		t.mu.Lock()
		if t.p == nil || t.ended {
			t.mu.Unlock()
			continue
		}
		t.suspended = true
		pid := t.info.PID
		t.mu.Unlock()
		if err := agent.Detach(ctx, pid); err != nil {
			m.cfg.Logger.Warn("detach a terminal for a pause; it ends with the pause", "session", l.rec.ID, "pty", t.info.PTYID, "err", err)
			t.mu.Lock()
			t.suspended = false
			t.mu.Unlock()
		}
	}
}

// reattachPTYs attaches the session's suspended terminals again, to the
// agent of its sandbox now (a restored one, or the same one when the
// save failed), each from the first byte of output it does not hold. A
// terminal whose program is gone ends.
func (m *Manager) reattachPTYs(ctx context.Context, l *live) {
	agent := l.sb().Agent()
	for _, t := range l.ptys.list() {
		t.mu.Lock()
		if !t.suspended || t.ended {
			t.mu.Unlock()
			continue
		}
		// From here on output of the old stream is dropped: the new one
		// sends whatever followed offset.
		t.gen++
		gen, offset, pid := t.gen, t.total, t.info.PID
		t.p = nil
		t.mu.Unlock()
		p, from, err := agent.AttachTerminal(ctx, pid, offset, ptyOutput{t: t, gen: gen})
		if err != nil {
			m.cfg.Logger.Warn("a terminal could not be attached again; it has ended", "session", l.rec.ID, "pty", t.info.PTYID, "err", err)
			t.end(gen, airlock.ExitStatus{}, fmt.Errorf("session: the terminal's program was not found after the resume: %w", err))
			continue
		}
		t.mu.Lock()
		if t.gen == gen {
			t.p = p
			t.suspended = false
			t.total += from - offset // output the agent no longer held
		}
		t.mu.Unlock()
		go t.follow(p, gen)
	}
}

// adoptPTYs takes into the session's table the terminals its agent runs
// that the table lacks (after a restart of the server: they are
// retained programs tagged with their PTY IDs), and attaches them.
func (m *Manager) adoptPTYs(ctx context.Context, l *live, tenant *airlock.Tenant) {
	procs, err := l.sb().Agent().Processes(ctx)
	if err != nil {
		m.cfg.Logger.Warn("the agent did not list its programs; its terminals are not taken back", "session", l.rec.ID, "err", err)
		return
	}
	id := l.rec.ID
	for _, p := range procs {
		if !p.Running || p.PTY == nil || !strings.HasPrefix(p.Tag, "pty-") || l.ptys.get(p.Tag) != nil {
			continue
		}
		t := newPTY(airlock.PTYInfo{PTYID: p.Tag, SessionID: id, PID: p.PID, Cols: p.PTY.Cols, Rows: p.PTY.Rows}, l.ptys, m.waker(tenant, id))
		t.suspended = true
		t.gen = -1 // reattachPTYs starts it at 0
		if err := l.ptys.add(t); err != nil {
			m.cfg.Logger.Warn("a terminal of the agent is not taken back", "session", id, "pty", p.Tag, "err", err)
			continue
		}
	}
	m.reattachPTYs(ctx, l)
}

// keepPTYs keeps a paused session's terminals for its resume.
func (m *Manager) keepPTYs(l *live) {
	if len(l.ptys.list()) > 0 {
		m.pausedPTYs.put(l.rec.ID, l.ptys)
	}
}

// resumePTYs gives a resumed session its terminals: those kept at its
// pause, attached again, and any the agent runs that were not kept (the
// server restarted while it was paused).
func (m *Manager) resumePTYs(ctx context.Context, l *live, tenant *airlock.Tenant) {
	if tab := m.pausedPTYs.take(l.rec.ID); tab != nil {
		l.ptys = tab // its terminals point to it already
	}
	m.adoptPTYs(ctx, l, tenant)
}

// endPausedPTYs ends the terminals kept for a paused session that has
// ended.
func (m *Manager) endPausedPTYs(id string) {
	if tab := m.pausedPTYs.take(id); tab != nil {
		tab.endAll(errSessionEnded)
	}
}
