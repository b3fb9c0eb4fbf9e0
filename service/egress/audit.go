package egress

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
)

// auditLog writes egress events to the store in batches, off the path of
// the connections and queries it records.
type auditLog struct {
	store airlock.EgressStore
	log   *slog.Logger

	mu      sync.Mutex
	queue   []*airlock.EgressEvent
	wake    chan struct{}
	flushed *sync.Cond // signalled after each write
	pending int        // events taken from the queue, not yet written
	dropped atomic.Int64
	closed  bool
	done    chan struct{}
}

// maxQueued bounds events waiting for the store; past it new events are
// counted and dropped (a sandbox flooding the log must not exhaust the
// host's memory), and the drop is itself recorded.
const maxQueued = 1 << 16

func newAuditLog(store airlock.EgressStore, log *slog.Logger) *auditLog {
	a := &auditLog{store: store, log: log, wake: make(chan struct{}, 1), done: make(chan struct{})}
	a.flushed = sync.NewCond(&a.mu)
	go a.run()
	return a
}

// record queues an event; it never blocks.
func (a *auditLog) record(ev *airlock.EgressEvent) {
	a.mu.Lock()
	if a.closed || len(a.queue) >= maxQueued {
		a.mu.Unlock()
		if a.dropped.Add(1)%1000 == 1 {
			a.log.Warn("egress audit log is full; events are dropped", "dropped", a.dropped.Load())
		}
		return
	}
	a.queue = append(a.queue, ev)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *auditLog) run() {
	defer close(a.done)
	for {
		<-a.wake
		// Let a burst gather into one transaction.
		time.Sleep(20 * time.Millisecond)
		for {
			a.mu.Lock()
			batch := a.queue
			a.queue = nil
			a.pending = len(batch)
			closed := a.closed
			a.mu.Unlock()
			if len(batch) == 0 {
				a.mu.Lock()
				a.flushed.Broadcast()
				a.mu.Unlock()
				if closed {
					return
				}
				break
			}
			for len(batch) > 0 {
				n := min(len(batch), 1000)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := a.store.RecordEgress(ctx, batch[:n]); err != nil {
					a.log.Error("write egress audit log", "events", n, "err", err)
				}
				cancel()
				batch = batch[n:]
			}
			a.mu.Lock()
			a.pending = 0
			a.flushed.Broadcast()
			a.mu.Unlock()
		}
	}
}

// flush waits until every event recorded before it is written (or ctx
// ends).
func (a *auditLog) flush(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		a.mu.Lock()
		for (len(a.queue) > 0 || a.pending > 0) && ctx.Err() == nil {
			a.flushed.Wait()
		}
		a.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		a.mu.Lock()
		a.flushed.Broadcast()
		a.mu.Unlock()
	}
}

// close writes what is queued and stops.
func (a *auditLog) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
	<-a.done
}
