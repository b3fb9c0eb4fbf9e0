package store

import (
	"context"
	"encoding/json"
	"math"

	"github.com/airlockhq/airlock"
)

// encodePhases stores phase timings as a JSON object.
func (db *DB) encodePhases(p map[string]float64) string {
	if len(p) == 0 {
		return "{}"
	}
	ok := make(map[string]float64, len(p))
	for k, v := range p {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			ok[k] = v
		}
	}
	b, err := json.Marshal(ok)
	if err != nil {
		return "{}"
	}
	return db.json(b)
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
	ctx, done := db.bound(ctx)
	defer done()
	if phase == "" || len(phase) > 32 || math.IsNaN(ms) || math.IsInf(ms, 0) {
		return airlock.Errorf(airlock.EINVALID, "bad phase %q", phase)
	}
	res, err := db.write.ExecContext(ctx, `UPDATE executions SET phases = `+db.d.JSONSet("phases", "$1", "$2")+`
		WHERE exec_id = $3 AND tenant_id = $4`, db.text(phase), ms, id, tenantID)
	if err != nil {
		return db.wrap(ctx, "record phase", err)
	}
	if affected(res) == 0 {
		return executionNotFound(id)
	}
	return nil
}
