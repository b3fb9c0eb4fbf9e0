package store

import (
	"context"
	"database/sql"
	"time"

	"github.com/airlockhq/airlock"
)

// pruneBatch bounds the rows one prune statement deletes, so that a
// first prune of a large table holds the write lock for short spells.
const pruneBatch = 5000

// PruneEvents deletes the events that happened before before, and the
// webhook deliveries queued before it, whatever their state. It returns
// how many of each it deleted. Every node of a fleet may run it: the
// deletes are idempotent.
func (db *DB) PruneEvents(ctx context.Context, before time.Time) (airlock.PruneCount, error) {
	var n airlock.PruneCount
	cut := nanos(before)
	for _, step := range []struct {
		what  string
		query string
		count *int64
	}{
		{"prune webhook deliveries", `DELETE FROM webhook_deliveries WHERE seq IN
			(SELECT seq FROM webhook_deliveries WHERE created_at < $1 ORDER BY created_at LIMIT $2)`, &n.Deliveries},
		{"prune events", `DELETE FROM events WHERE seq IN
			(SELECT seq FROM events WHERE at < $1 ORDER BY at LIMIT $2)`, &n.Events},
	} {
		for {
			var got int64
			err := func() error {
				ctx, done := db.bound(ctx)
				defer done()
				return db.inWriteTx(ctx, func(tx *sql.Tx) error {
					res, err := tx.ExecContext(ctx, step.query, cut, pruneBatch)
					if err != nil {
						return err
					}
					got, err = res.RowsAffected()
					return err
				})
			}()
			if err != nil {
				return n, db.wrap(ctx, step.what, err)
			}
			*step.count += got
			if got < pruneBatch {
				break
			}
		}
	}
	return n, nil
}
