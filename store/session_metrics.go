package store

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

var _ airlock.SessionMetricsStore = (*DB)(nil)

// DefaultSampleLimit and MaxSampleLimit bound one read of a session's
// samples: a day at one sample every 5 s is 17,280.
const (
	DefaultSampleLimit = 20000
	MaxSampleLimit     = 20000
)

// AddSessionSample records one sample of a tenant's session. A second
// sample at the same instant replaces the first.
func (db *DB) AddSessionSample(ctx context.Context, tenantID, sessionID string, s airlock.MetricSample) error {
	if tenantID == "" || sessionID == "" || s.At.IsZero() {
		return airlock.Errorf(airlock.EINVALID, "a session sample needs a tenant, a session and a time")
	}
	ctx, done := db.bound(ctx)
	defer done()
	cpu := int64(math.Round(s.CPUPct * 100))
	_, err := db.write.ExecContext(ctx,
		`INSERT INTO session_samples (tenant_id, session_id, at, cpu_centipct, memory_bytes, disk_bytes, net_rx_bytes, net_tx_bytes)
		 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		 ON CONFLICT (tenant_id, session_id, at) DO UPDATE SET cpu_centipct = excluded.cpu_centipct,
		 memory_bytes = excluded.memory_bytes, disk_bytes = excluded.disk_bytes,
		 net_rx_bytes = excluded.net_rx_bytes, net_tx_bytes = excluded.net_tx_bytes`,
		tenantID, sessionID, nanos(s.At), cpu, s.MemoryBytes, s.DiskBytes, s.NetRxBytes, s.NetTxBytes)
	if db.isForeignKey(err) {
		return tenantNotFound(tenantID)
	}
	return db.wrap(ctx, "add session sample", err)
}

// SessionSamples returns the samples f selects, oldest first.
func (db *DB) SessionSamples(ctx context.Context, f airlock.MetricsFilter) ([]airlock.MetricSample, error) {
	if f.TenantID == "" || f.SessionID == "" {
		return nil, airlock.Errorf(airlock.EINVALID, "session samples need a tenant and a session")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultSampleLimit
	}
	limit = min(limit, MaxSampleLimit)
	args := []any{f.TenantID, f.SessionID}
	where := []string{"tenant_id = $1", "session_id = $2"}
	if !f.Start.IsZero() {
		args = append(args, nanos(f.Start))
		where = append(where, fmt.Sprintf("at >= $%d", len(args)))
	}
	if !f.End.IsZero() {
		args = append(args, nanos(f.End))
		where = append(where, fmt.Sprintf("at <= $%d", len(args)))
	}
	args = append(args, limit)
	q := `SELECT at, cpu_centipct, memory_bytes, disk_bytes, net_rx_bytes, net_tx_bytes FROM session_samples WHERE ` +
		strings.Join(where, " AND ") + fmt.Sprintf(" ORDER BY at LIMIT $%d", len(args))
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, db.wrap(ctx, "list session samples", err)
	}
	defer rows.Close()
	out := []airlock.MetricSample{}
	for rows.Next() {
		var s airlock.MetricSample
		var at, cpu int64
		if err := rows.Scan(&at, &cpu, &s.MemoryBytes, &s.DiskBytes, &s.NetRxBytes, &s.NetTxBytes); err != nil {
			return nil, db.wrap(ctx, "list session samples", err)
		}
		s.At, s.CPUPct = fromNanos(at), float64(cpu)/100
		out = append(out, s)
	}
	return out, db.wrap(ctx, "list session samples", rows.Err())
}

// DeleteSessionSamplesBefore deletes the samples taken before t of
// sessions that ended before t or have no record; those of a session
// still going, or ended since, stay.
func (db *DB) DeleteSessionSamplesBefore(ctx context.Context, t time.Time) (int64, error) {
	ctx, done := db.bound(ctx)
	defer done()
	res, err := db.write.ExecContext(ctx, `DELETE FROM session_samples WHERE at < $1 AND NOT EXISTS (
		SELECT 1 FROM sessions s WHERE s.id = session_samples.session_id AND (s.ended_at IS NULL OR s.ended_at >= $1))`, nanos(t))
	if err != nil {
		return 0, db.wrap(ctx, "delete session samples", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
