package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"

	"github.com/airlockhq/airlock"
)

// encodePhases stores phase timings as a JSON object.
func encodePhases(p map[string]float64) string {
	if len(p) == 0 {
		return "{}"
	}
	clean := make(map[string]float64, len(p))
	for k, v := range p {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			clean[k] = v
		}
	}
	b, err := json.Marshal(clean)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// decodePhases reads what encodePhases wrote; nil for none.
func decodePhases(s string) map[string]float64 {
	var p map[string]float64
	if json.Unmarshal([]byte(s), &p) != nil || len(p) == 0 {
		return nil
	}
	return p
}

// RecordPhase sets one phase's milliseconds on a finished execution of the
// tenant. ENOTFOUND if the tenant has no such execution.
func (db *DB) RecordPhase(ctx context.Context, tenantID, id, phase string, ms float64) error {
	if phase == "" || len(phase) > 32 || math.IsNaN(ms) || math.IsInf(ms, 0) {
		return airlock.Errorf(airlock.EINVALID, "bad phase %q", phase)
	}
	err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE executions SET phases = json_set(phases, '$.' || ?, ?)
			WHERE exec_id = ? AND tenant_id = ?`, phase, ms, id, tenantID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return executionNotFound(id)
		}
		return nil
	})
	return wrap("record phase", err)
}
