package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"database/sql"

	"github.com/airlockhq/airlock"
)

var _ airlock.E2BStore = (*DB)(nil)

// PutE2BSandbox records s, replacing an earlier record of the sandbox.
// The session must exist and belong to s.TenantID (else ENOTFOUND).
func (db *DB) PutE2BSandbox(ctx context.Context, s *airlock.E2BSandbox) error {
	ctx, done := db.bound(ctx)
	defer done()
	if s.SandboxID == "" || s.TenantID == "" || s.TemplateID == "" {
		return airlock.Errorf(airlock.EINVALID, "e2b sandbox: id, tenant and template are required")
	}
	meta, err1 := json.Marshal(orEmpty(s.Metadata))
	env, err2 := json.Marshal(orEmpty(s.EnvVars))
	ctxs, err3 := json.Marshal(orEmpty(s.Contexts))
	if err := errors.Join(err1, err2, err3); err != nil {
		return fmt.Errorf("store: encode e2b sandbox: %w", err)
	}
	created := stamp(s.CreatedAt, db.now())
	notFound := airlock.Errorf(airlock.ENOTFOUND, "no session %s of tenant %s", s.SandboxID, s.TenantID)
	err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = $1 AND tenant_id = $2`,
			s.SandboxID, s.TenantID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound
		} else if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO e2b_sandboxes
			(sandbox_id, tenant_id, template_id, metadata, env_vars, contexts, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (sandbox_id) DO UPDATE SET template_id = excluded.template_id,
				metadata = excluded.metadata, env_vars = excluded.env_vars, contexts = excluded.contexts
			WHERE e2b_sandboxes.tenant_id = excluded.tenant_id`,
			s.SandboxID, s.TenantID, db.text(s.TemplateID), db.json(meta), db.json(env), db.json(ctxs), nanos(created))
		switch {
		case db.isForeignKey(err): // the session ended meanwhile
			return notFound
		case err != nil:
			return err
		case affected(res) == 0:
			return notFound
		}
		return nil
	})
	if err != nil {
		return db.wrap(ctx, "put e2b sandbox", err)
	}
	s.CreatedAt = created
	return nil
}

// E2BSandbox returns the record of a sandbox, or ENOTFOUND.
func (db *DB) E2BSandbox(ctx context.Context, id string) (*airlock.E2BSandbox, error) {
	ctx, done := db.bound(ctx)
	defer done()
	var s airlock.E2BSandbox
	var meta, env, ctxs string
	var created int64
	err := db.read.QueryRowContext(ctx, `SELECT sandbox_id, tenant_id, template_id, metadata, env_vars, contexts, created_at
		FROM e2b_sandboxes WHERE sandbox_id = $1`, id).Scan(&s.SandboxID, &s.TenantID, &s.TemplateID, &meta, &env, &ctxs, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("e2b sandbox %s: %w", id, airlock.ErrNotFound)
	}
	if err != nil {
		return nil, db.wrap(ctx, "e2b sandbox", err)
	}
	err1 := json.Unmarshal([]byte(meta), &s.Metadata)
	err2 := json.Unmarshal([]byte(env), &s.EnvVars)
	err3 := json.Unmarshal([]byte(ctxs), &s.Contexts)
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("store: decode e2b sandbox %s: %w", id, err)
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
