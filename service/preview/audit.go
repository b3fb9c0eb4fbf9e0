package preview

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// maxAuditPath bounds the path kept in an audit entry.
const maxAuditPath = 512

// record queues the audit entry of one request: method (Protocol), path
// (Name), port, Host, bytes each way, status (Detail), how it was
// admitted (Reason: key, token, cookie or public) and duration.
func (s *Service) record(t *airlock.PreviewTarget, r *http.Request, rq *request, start time.Time, status int, how, verdict string) {
	if s.audit == nil {
		return
	}
	p := rq.path
	if len(p) > maxAuditPath {
		p = p[:maxAuditPath]
	}
	proto := r.Method
	if status == http.StatusSwitchingProtocols {
		proto = r.Method + " upgrade"
	}
	s.audit.add(&airlock.EgressEvent{
		TenantID:   t.TenantID,
		SessionID:  t.SessionID,
		Time:       start.UTC(),
		Kind:       airlock.EgressPreview,
		Protocol:   proto,
		Name:       p,
		Port:       rq.port,
		Host:       cut(r.Host, 255),
		BytesUp:    rq.up.n.Load(),
		BytesDown:  rq.down.n.Load(),
		Verdict:    verdict,
		Reason:     how,
		Detail:     "status " + strconv.Itoa(status),
		DurationMS: s.cfg.Now().Sub(start).Milliseconds(),
	})
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// auditLog writes entries to the store in batches, off the requests'
// path. Past maxQueued waiting entries new ones are dropped and counted
// (a flood of requests must not exhaust the node's memory).
type auditLog struct {
	store airlock.EgressStore
	log   *slog.Logger

	mu      sync.Mutex
	queue   []*airlock.EgressEvent
	dropped int64
	closed  bool
	wake    chan struct{}
	done    chan struct{}
}

const maxQueued = 1 << 14

func newAuditLog(store airlock.EgressStore, log *slog.Logger) *auditLog {
	a := &auditLog{store: store, log: log, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go a.run()
	return a
}

func (a *auditLog) add(ev *airlock.EgressEvent) {
	a.mu.Lock()
	if a.closed || len(a.queue) >= maxQueued {
		a.dropped++
		n := a.dropped
		a.mu.Unlock()
		if n%1000 == 1 {
			a.log.Warn("preview audit log is full; entries are dropped", "dropped", n)
		}
		return
	}
	a.queue = append(a.queue, ev)
	select { // under mu: close never races a send
	case a.wake <- struct{}{}:
	default:
	}
	a.mu.Unlock()
}

func (a *auditLog) run() {
	defer close(a.done)
	for {
		_, open := <-a.wake
		a.mu.Lock()
		batch := a.queue
		a.queue = nil
		a.mu.Unlock()
		for len(batch) > 0 {
			n := min(len(batch), 500)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := a.store.RecordEgress(ctx, batch[:n]); err != nil {
				a.log.Error("write preview audit log", "entries", n, "err", err)
			}
			cancel()
			batch = batch[n:]
		}
		if !open {
			return
		}
	}
}

// close writes what is queued and stops.
func (a *auditLog) close() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	a.mu.Unlock()
	close(a.wake)
	<-a.done
}
