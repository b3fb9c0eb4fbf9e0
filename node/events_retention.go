package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/airlockhq/airlock"
)

// Events and webhook deliveries are kept for EventsRetention
// (--events-retention) and then deleted by a pruner every node runs (in
// a fleet each prunes the shared store; the deletes are idempotent).

// pruneEvery is how often the pruner runs for a retention: a tenth of
// it, at least a second and at most ten minutes.
func pruneEvery(retention time.Duration) time.Duration {
	return min(max(retention/10, time.Second), 10*time.Minute)
}

// eventPruner deletes events and deliveries older than retention.
type eventPruner struct {
	store     airlock.EventPruner
	retention time.Duration
	now       func() time.Time
	logger    *slog.Logger
	stop      chan struct{}
	done      chan struct{}
}

// startEventPruner starts the pruner; stop it with close.
func startEventPruner(store airlock.EventPruner, retention time.Duration, now func() time.Time, logger *slog.Logger) *eventPruner {
	if now == nil {
		now = time.Now
	}
	p := &eventPruner{store: store, retention: retention, now: now, logger: logger, stop: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return p
}

func (p *eventPruner) loop() {
	defer close(p.done)
	t := time.NewTicker(pruneEvery(p.retention))
	defer t.Stop()
	for {
		p.prune(context.Background())
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
	}
}

// prune deletes once what is past the retention.
func (p *eventPruner) prune(ctx context.Context) {
	n, err := p.store.PruneEvents(ctx, p.now().Add(-p.retention))
	if err != nil {
		p.logger.Error("prune events past their retention", "err", err)
		return
	}
	if n.Events+n.Deliveries > 0 {
		p.logger.Info("pruned events past their retention", "events", n.Events, "deliveries", n.Deliveries, "retention", p.retention)
	}
}

func (p *eventPruner) close() {
	close(p.stop)
	<-p.done
}
