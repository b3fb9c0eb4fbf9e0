package postgres

import (
	"context"
	"encoding/json"
	"math"

	"github.com/airlockhq/airlock"
)

// encodePhases stores phase timings as a JSON object.
func encodePhases(p map[string]float64) string {
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
	return cleanJSON(b)
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
	tag, err := db.pool.Exec(ctx, `UPDATE executions SET phases = phases || jsonb_build_object($1::text, $2::float8)
		WHERE exec_id = $3 AND tenant_id = $4`, clean(phase), ms, id, tenantID)
	if err != nil {
		return wrap(ctx, "record phase", err)
	}
	if tag.RowsAffected() == 0 {
		return executionNotFound(id)
	}
	return nil
}
