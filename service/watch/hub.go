package watch

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/airlockhq/airlock"
)

// hub is where runs publish and watchers read, per session.
type hub struct {
	maxWatchers int
	queueBytes  int
	keepBytes   int
	nextRun     atomic.Int64

	mu       sync.Mutex
	sessions map[string]*feed // by session ID; dropped when empty
	closed   bool
}

// feed is one session's runs under way and watchers.
type feed struct {
	runs     map[*run]struct{}
	watchers map[*watcher]struct{}
}

func newHub(maxWatchers, queueBytes, keepBytes int) *hub {
	return &hub{maxWatchers: maxWatchers, queueBytes: queueBytes, keepBytes: keepBytes, sessions: map[string]*feed{}}
}

// feedLocked returns the session's feed, making it if create.
func (h *hub) feedLocked(session string, create bool) *feed {
	f := h.sessions[session]
	if f == nil && create {
		f = &feed{runs: map[*run]struct{}{}, watchers: map[*watcher]struct{}{}}
		h.sessions[session] = f
	}
	return f
}

// tidyLocked forgets a session's feed once nothing is in it.
func (h *hub) tidyLocked(session string) {
	if f := h.sessions[session]; f != nil && len(f.runs) == 0 && len(f.watchers) == 0 {
		delete(h.sessions, session)
	}
}

// eventBytes is what an event counts against a queue or the kept output.
func eventBytes(ev airlock.SessionEvent) int { return len(ev.Data) + len(ev.Command) + 128 }

// run is one exec or cell of a session. Its events are published once it
// has started (the wrapped service may fail a call before); output that
// comes before its start waits for it.
type run struct {
	h       *hub
	session string
	id      int64
	kind    string
	command string

	// Guarded by h.mu.
	started bool
	startEv airlock.SessionEvent
	kept    []airlock.SessionEvent // latest output, at most keepBytes
	keptN   int
	dropped bool // output before kept was let go
	ended   bool
}

// begin registers a run that is about to start.
func (h *hub) begin(session, kind, command string) *run {
	return &run{h: h, session: session, id: h.nextRun.Add(1), kind: kind, command: command}
}

// start publishes the run's start, then the output that came before it.
func (r *run) start(ev airlock.SessionEvent) {
	h := r.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.started || r.ended {
		return
	}
	ev.Type, ev.Run, ev.Kind, ev.Command = airlock.EventStart, r.id, r.kind, r.command
	r.started, r.startEv = true, ev
	f := h.feedLocked(r.session, true)
	f.runs[r] = struct{}{}
	h.sendLocked(f, ev)
	for _, o := range r.kept {
		h.sendLocked(f, o)
	}
}

// output publishes a chunk of output (a copy: the caller may reuse p).
func (r *run) output(typ string, p []byte) {
	if len(p) == 0 {
		return
	}
	ev := airlock.SessionEvent{Type: typ, Run: r.id, Data: append([]byte(nil), p...)}
	h := r.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.ended {
		return
	}
	r.keep(ev)
	if r.started {
		if f := h.feedLocked(r.session, false); f != nil {
			h.sendLocked(f, ev)
		}
	}
}

// keep adds ev to the kept output, letting the oldest go past keepBytes.
func (r *run) keep(ev airlock.SessionEvent) {
	r.kept = append(r.kept, ev)
	r.keptN += len(ev.Data)
	for r.keptN > r.h.keepBytes && len(r.kept) > 1 {
		r.keptN -= len(r.kept[0].Data)
		r.kept[0] = airlock.SessionEvent{}
		r.kept = r.kept[1:]
		r.dropped = true
	}
}

// end publishes the run's end (if it started) and forgets it.
func (r *run) end(ev airlock.SessionEvent) {
	h := r.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.ended {
		return
	}
	r.ended = true
	r.kept = nil
	if !r.started {
		return
	}
	ev.Type, ev.Run = airlock.EventEnd, r.id
	if f := h.feedLocked(r.session, false); f != nil {
		delete(f.runs, r)
		h.sendLocked(f, ev)
	}
	h.tidyLocked(r.session)
}

// sendLocked queues ev for every watcher of f; a watcher whose queue is
// full is dropped.
func (h *hub) sendLocked(f *feed, ev airlock.SessionEvent) {
	for w := range f.watchers {
		if !w.push(ev) {
			delete(f.watchers, w)
		}
	}
}

// watch adds a watcher to a session, with the runs under way replayed.
func (h *hub) watch(session string) (*watcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errShuttingDown
	}
	f := h.feedLocked(session, true)
	if len(f.watchers) >= h.maxWatchers {
		h.tidyLocked(session)
		return nil, airlock.Problem(airlock.ERATELIMITED, "too-many-watchers", "session %s has %d watchers already; close one first", session, h.maxWatchers)
	}
	w := &watcher{h: h, session: session, max: h.queueBytes, wake: make(chan struct{}, 1)}
	runs := make([]*run, 0, len(f.runs))
	for r := range f.runs {
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b *run) int { return cmp.Compare(a.id, b.id) })
	for _, r := range runs {
		ev := r.startEv
		ev.Replay, ev.EarlierDropped = true, r.dropped
		w.push(ev)
		for _, o := range r.kept {
			o.Replay = true
			w.push(o)
		}
	}
	f.watchers[w] = struct{}{}
	return w, nil
}

// closeSession ends every watch of a session that is gone.
func (h *hub) closeSession(session string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.sessions[session]
	if f == nil {
		return
	}
	for w := range f.watchers {
		w.finish(errSessionGone)
		delete(f.watchers, w)
	}
	h.tidyLocked(session)
}

// close ends every watch, for good.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for session, f := range h.sessions {
		for w := range f.watchers {
			w.finish(errShuttingDown)
			delete(f.watchers, w)
		}
		h.tidyLocked(session)
	}
}

var errShuttingDown = airlock.Problem(airlock.EUNAVAILABLE, "shutting-down", "the server is stopping; watch again once it is back")

var errSessionGone = airlock.Problem(airlock.ECONFLICT, "session-ended", "the session has ended")

// watcher is one watch: a queue of events bounded in bytes.
type watcher struct {
	h       *hub
	session string
	max     int
	wake    chan struct{}

	mu     sync.Mutex
	queue  []airlock.SessionEvent
	bytes  int
	err    error // why the watch ended, once it has
	closed bool
}

var _ airlock.SessionFeed = (*watcher)(nil)

// push queues ev; past the bound the watcher ends with ErrWatchDropped
// and push reports false.
func (w *watcher) push(ev airlock.SessionEvent) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return false
	}
	n := eventBytes(ev)
	if w.bytes+n > w.max {
		w.queue, w.bytes, w.err = nil, 0, airlock.ErrWatchDropped
		w.signal()
		return false
	}
	w.queue = append(w.queue, ev)
	w.bytes += n
	w.signal()
	return true
}

func (w *watcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// finish ends the watch with err after what is queued.
func (w *watcher) finish(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
	w.signal()
}

// Next returns the next event, waiting for one.
func (w *watcher) Next(ctx context.Context) (airlock.SessionEvent, error) {
	for {
		w.mu.Lock()
		if len(w.queue) > 0 && w.err != airlock.ErrWatchDropped {
			ev := w.queue[0]
			w.queue[0] = airlock.SessionEvent{}
			w.queue = w.queue[1:]
			w.bytes -= eventBytes(ev)
			w.mu.Unlock()
			return ev, nil
		}
		err := w.err
		w.mu.Unlock()
		if err != nil {
			return airlock.SessionEvent{}, err
		}
		select {
		case <-ctx.Done():
			return airlock.SessionEvent{}, ctx.Err()
		case <-w.wake:
		}
	}
}

// Close ends the watch and takes the watcher off its session.
func (w *watcher) Close() {
	w.finish(errClosed)
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if f := h.sessions[w.session]; f != nil {
		delete(f.watchers, w)
		h.tidyLocked(w.session)
	}
}

var errClosed = airlock.Errorf(airlock.ECONFLICT, "the watch was closed")
