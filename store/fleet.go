package store

import (
	"context"

	"database/sql"

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
	err = db.inWriteTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET state = 'lost', end_reason = $1, end_detail = $2, ended_at = $3
			WHERE node_id = $4 AND state NOT IN ('destroyed', 'failed', 'lost')`, airlock.EndNodeLost, db.text(detail), now, node)
		if err != nil {
			return err
		}
		sessions = int(affected(res))
		res, err = tx.ExecContext(ctx, `UPDATE executions SET status = 'failed', error = $1, finished_at = $2
			WHERE node_id = $3 AND status = 'running'`, db.text("lost: "+detail), now, node)
		if err != nil {
			return err
		}
		executions = int(affected(res))
		return nil
	})
	return sessions, executions, db.wrap(ctx, "mark node lost", err)
}

// LiveSessionNodes lists the nodes that have unfinished sessions ("" for
// those made without a fleet).
func (db *DB) LiveSessionNodes(ctx context.Context) ([]string, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.read.QueryContext(ctx, `SELECT DISTINCT node_id FROM sessions
		WHERE state NOT IN ('destroyed', 'failed', 'lost') ORDER BY node_id`)
	if err != nil {
		return nil, db.wrap(ctx, "live session nodes", err)
	}
	defer rows.Close()
	var nodes []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, db.wrap(ctx, "live session nodes", err)
		}
		nodes = append(nodes, n)
	}
	return nodes, db.wrap(ctx, "live session nodes", rows.Err())
}
