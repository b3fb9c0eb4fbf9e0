package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/airlockhq/airlock"
)

var _ airlock.E2BStore = (*DB)(nil)

// PutE2BSandbox records s, replacing an earlier record of the sandbox.
// The session must exist and belong to s.TenantID (else ENOTFOUND).
func (db *DB) PutE2BSandbox(ctx context.Context, s *airlock.E2BSandbox) error {
	if s.SandboxID == "" || s.TenantID == "" || s.TemplateID == "" {
		return airlock.Errorf(airlock.EINVALID, "e2b sandbox: id, tenant and template are required")
	}
	meta, err1 := json.Marshal(orEmpty(s.Metadata))
	env, err2 := json.Marshal(orEmpty(s.EnvVars))
	ctxs, err3 := json.Marshal(orEmpty(s.Contexts))
	if err := errors.Join(err1, err2, err3); err != nil {
		return fmt.Errorf("sqlite: encode e2b sandbox: %w", err)
	}
	created := stamp(s.CreatedAt, db.now())
	res, err := db.write.ExecContext(ctx, `INSERT INTO e2b_sandboxes
		(sandbox_id, tenant_id, template_id, metadata, env_vars, contexts, created_at)
		SELECT ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ? AND tenant_id = ?)
		ON CONFLICT (sandbox_id) DO UPDATE SET template_id = excluded.template_id,
			metadata = excluded.metadata, env_vars = excluded.env_vars, contexts = excluded.contexts
		WHERE e2b_sandboxes.tenant_id = excluded.tenant_id`,
		s.SandboxID, s.TenantID, s.TemplateID, string(meta), string(env), string(ctxs), nanos(created),
		s.SandboxID, s.TenantID)
	if err != nil {
		return wrap("put e2b sandbox", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return airlock.Errorf(airlock.ENOTFOUND, "no session %s of tenant %s", s.SandboxID, s.TenantID)
	}
	s.CreatedAt = created
	return nil
}

// E2BSandbox returns the record of a sandbox, or ENOTFOUND.
func (db *DB) E2BSandbox(ctx context.Context, id string) (*airlock.E2BSandbox, error) {
	var s airlock.E2BSandbox
	var meta, env, ctxs string
	var created int64
	err := db.read.QueryRowContext(ctx, `SELECT sandbox_id, tenant_id, template_id, metadata, env_vars, contexts, created_at
		FROM e2b_sandboxes WHERE sandbox_id = ?`, id).Scan(&s.SandboxID, &s.TenantID, &s.TemplateID, &meta, &env, &ctxs, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("e2b sandbox %s: %w", id, airlock.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("e2b sandbox", err)
	}
	err1 := json.Unmarshal([]byte(meta), &s.Metadata)
	err2 := json.Unmarshal([]byte(env), &s.EnvVars)
	err3 := json.Unmarshal([]byte(ctxs), &s.Contexts)
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("sqlite: decode e2b sandbox %s: %w", id, err)
	}
	s.CreatedAt = fromNanos(created)
	return &s, nil
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
