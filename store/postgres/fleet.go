package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock"
)

// MarkNodeLost records lost every unfinished session of node (end reason
// node_lost, with detail, ended now) and fails its running executions, in
// one transaction; it returns how many of each it changed. The fleet's
// reaper calls it for a node whose lease expired.
func (db *DB) MarkNodeLost(ctx context.Context, node, detail string) (sessions, executions int, err error) {
	if node == "" {
		return 0, 0, airlock.Errorf(airlock.EINVALID, "a node ID is required")
	}
	ctx, done := db.bound(ctx)
	defer done()
	now := nanos(db.now())
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE sessions SET state = 'lost', end_reason = $1, end_detail = $2, ended_at = $3
			WHERE node_id = $4 AND state NOT IN ('destroyed', 'failed', 'lost')`, airlock.EndNodeLost, clean(detail), now, node)
		if err != nil {
			return err
		}
		sessions = int(tag.RowsAffected())
		tag, err = tx.Exec(ctx, `UPDATE executions SET status = 'failed', error = $1, finished_at = $2
			WHERE node_id = $3 AND status = 'running'`, clean("lost: "+detail), now, node)
		if err != nil {
			return err
		}
		executions = int(tag.RowsAffected())
		return nil
	})
	return sessions, executions, wrap(ctx, "mark node lost", err)
}

// LiveSessionNodes lists the nodes that have unfinished sessions ("" for
// those made without a fleet).
func (db *DB) LiveSessionNodes(ctx context.Context) ([]string, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.pool.Query(ctx, `SELECT DISTINCT node_id FROM sessions
		WHERE state NOT IN ('destroyed', 'failed', 'lost') ORDER BY node_id`)
	if err != nil {
		return nil, wrap(ctx, "live session nodes", err)
	}
	nodes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return nodes, wrap(ctx, "live session nodes", err)
}
