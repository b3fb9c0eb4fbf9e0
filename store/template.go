package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/airlockhq/airlock"
)

var _ airlock.TemplateStore = (*DB)(nil)

const templateColumns = `id, tenant_id, name, status, reason, failed_line, source, from_image, context_id, session_id,
	digest, image_hash, size_bytes, start_cmd, ready_cmd, env, workdir, run_user, created_at, ready_at, memory_snapshot_id, blob_digest`

func scanTemplate(row scanner) (*airlock.Template, error) {
	var t airlock.Template
	var env string
	var created int64
	var ready *int64
	if err := row.Scan(&t.ID, &t.TenantID, &t.Name, &t.Status, &t.Reason, &t.FailedLine, &t.Source, &t.FromImage,
		&t.ContextID, &t.SessionID, &t.Digest, &t.ImageHash, &t.SizeBytes, &t.StartCmd, &t.ReadyCmd, &env,
		&t.Workdir, &t.User, &created, &ready, &t.MemorySnapshotID, &t.BlobDigest); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(env), &t.Env); err != nil {
		return nil, err
	}
	t.CreatedAt, t.ReadyAt = fromNanos(created), fromNullNanos(ready)
	return &t, nil
}

func templateEnv(env []string) string {
	if env == nil {
		env = []string{}
	}
	b, _ := json.Marshal(env)
	return string(b)
}

func templateNotFound(what string) error {
	return airlock.Problem(airlock.ENOTFOUND, "template-not-found", "template %s not found", what)
}

// CreateTemplate records t; an empty ID gets a new ULID and a zero
// CreatedAt the clock's time. ECONFLICT if its owner has one of that name.
func (db *DB) CreateTemplate(ctx context.Context, t *airlock.Template) error {
	if t.Name == "" || t.Status == "" || t.Source == "" {
		return airlock.Errorf(airlock.EINVALID, "a template needs a name, a status and a source")
	}
	ctx, done := db.bound(ctx)
	defer done()
	now := db.now()
	if t.ID == "" {
		t.ID = db.newID(now)
	}
	t.CreatedAt = stamp(t.CreatedAt, now)
	_, err := db.write.ExecContext(ctx, `INSERT INTO templates (`+templateColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)`,
		t.ID, t.TenantID, t.Name, string(t.Status), t.Reason, t.FailedLine, string(t.Source), t.FromImage, t.ContextID,
		t.SessionID, t.Digest, t.ImageHash, t.SizeBytes, t.StartCmd, t.ReadyCmd, templateEnv(t.Env), t.Workdir, t.User,
		nanos(t.CreatedAt), nullNanos(t.ReadyAt), t.MemorySnapshotID, t.BlobDigest)
	if db.isUnique(err) {
		return airlock.Problem(airlock.ECONFLICT, "template-exists", "a template named %q exists; delete it first or choose another name", t.Name)
	}
	return db.wrap(ctx, "create template", err)
}

// TemplateByName returns the owner's template of that name.
func (db *DB) TemplateByName(ctx context.Context, tenantID, name string) (*airlock.Template, error) {
	ctx, done := db.bound(ctx)
	defer done()
	t, err := scanTemplate(db.read.QueryRowContext(ctx, `SELECT `+templateColumns+` FROM templates
		WHERE tenant_id = $1 AND name = $2`, tenantID, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, templateNotFound(strconv.Quote(name))
	}
	return t, db.wrap(ctx, "template", err)
}

// TemplateByID returns a template by its ID.
func (db *DB) TemplateByID(ctx context.Context, id string) (*airlock.Template, error) {
	ctx, done := db.bound(ctx)
	defer done()
	t, err := scanTemplate(db.read.QueryRowContext(ctx, `SELECT `+templateColumns+` FROM templates WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, templateNotFound(id)
	}
	return t, db.wrap(ctx, "template", err)
}

// ListTemplates returns the tenant's templates and the operator's by
// name; where both have a name, only the tenant's (it is the one that
// resolves).
func (db *DB) ListTemplates(ctx context.Context, tenantID string) ([]airlock.Template, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.read.QueryContext(ctx, `SELECT `+templateColumns+` FROM templates
		WHERE tenant_id = $1 OR tenant_id = '' ORDER BY name, tenant_id DESC`, tenantID)
	if err != nil {
		return nil, db.wrap(ctx, "list templates", err)
	}
	defer rows.Close()
	out := []airlock.Template{}
	for rows.Next() {
		t, err := scanTemplate(rows)
		if err != nil {
			return nil, db.wrap(ctx, "list templates", err)
		}
		if n := len(out); n > 0 && out[n-1].Name == t.Name {
			continue // the operator's, shadowed by the tenant's
		}
		out = append(out, *t)
	}
	return out, db.wrap(ctx, "list templates", rows.Err())
}

// UpdateTemplate writes the build's outcome.
func (db *DB) UpdateTemplate(ctx context.Context, t *airlock.Template) error {
	ctx, done := db.bound(ctx)
	defer done()
	res, err := db.write.ExecContext(ctx, `UPDATE templates SET status = $1, reason = $2, failed_line = $3, digest = $4,
		image_hash = $5, size_bytes = $6, env = $7, workdir = $8, run_user = $9, ready_at = $10, blob_digest = $11 WHERE id = $12`,
		string(t.Status), t.Reason, t.FailedLine, t.Digest, t.ImageHash, t.SizeBytes, templateEnv(t.Env), t.Workdir,
		t.User, nullNanos(t.ReadyAt), t.BlobDigest, t.ID)
	if err != nil {
		return db.wrap(ctx, "update template", err)
	}
	if affected(res) != 1 {
		return templateNotFound(t.ID)
	}
	return nil
}

// DeleteTemplate removes a template's record.
func (db *DB) DeleteTemplate(ctx context.Context, id string) error {
	ctx, done := db.bound(ctx)
	defer done()
	res, err := db.write.ExecContext(ctx, `DELETE FROM templates WHERE id = $1`, id)
	if err != nil {
		return db.wrap(ctx, "delete template", err)
	}
	if affected(res) != 1 {
		return templateNotFound(id)
	}
	return nil
}

// TemplateBytes is the total size of the owner's templates.
func (db *DB) TemplateBytes(ctx context.Context, tenantID string) (int64, error) {
	ctx, done := db.bound(ctx)
	defer done()
	var n sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT SUM(size_bytes) FROM templates WHERE tenant_id = $1`, tenantID).Scan(&n)
	return n.Int64, db.wrap(ctx, "template bytes", err)
}

// LiveSessionsOnImage counts the sessions not yet ended on the image.
func (db *DB) LiveSessionsOnImage(ctx context.Context, image string) (int, error) {
	ctx, done := db.bound(ctx)
	defer done()
	var n int
	err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM sessions
		WHERE image = $1 AND state NOT IN ('destroyed', 'failed', 'lost')`, image).Scan(&n)
	return n, db.wrap(ctx, "sessions on image", err)
}

// FailBuildingTemplates marks the templates still building failed.
func (db *DB) FailBuildingTemplates(ctx context.Context, reason string) (int, error) {
	ctx, done := db.bound(ctx)
	defer done()
	res, err := db.write.ExecContext(ctx, `UPDATE templates SET status = 'failed', reason = $1 WHERE status = 'building'`, reason)
	if err != nil {
		return 0, db.wrap(ctx, "fail building templates", err)
	}
	return int(affected(res)), nil
}
