package sqlite

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
	now := nanos(db.now())
	err = db.inWriteTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET state = 'lost', end_reason = ?, end_detail = ?, ended_at = ?
			WHERE node_id = ? AND state NOT IN ('destroyed', 'failed', 'lost')`, airlock.EndNodeLost, detail, now, node)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		sessions = int(n)
		res, err = tx.ExecContext(ctx, `UPDATE executions SET status = 'failed', error = ?, finished_at = ?
			WHERE node_id = ? AND status = 'running'`, "lost: "+detail, now, node)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		executions = int(n)
		return err
	})
	return sessions, executions, wrap("mark node lost", err)
}

// LiveSessionNodes lists the nodes that have unfinished sessions ("" for
// those made without a fleet).
func (db *DB) LiveSessionNodes(ctx context.Context) ([]string, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT DISTINCT node_id FROM sessions
		WHERE state NOT IN ('destroyed', 'failed', 'lost') ORDER BY node_id`)
	if err != nil {
		return nil, wrap("live session nodes", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, wrap("live session nodes", err)
		}
		out = append(out, n)
	}
	return out, wrap("live session nodes", rows.Err())
}
