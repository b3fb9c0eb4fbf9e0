package store

import (
	"context"
	"errors"
	"fmt"

	"database/sql"

	"github.com/airlockhq/airlock"
)

// artifactColumns lists the columns scanArtifact reads. Artifacts are
// written by FinishExecution, with their execution.
const artifactColumns = `id, exec_id, tenant_id, filename, size_bytes, content_type, sha256`

func scanArtifact(row scanner) (*airlock.Artifact, error) {
	var a airlock.Artifact
	err := row.Scan(&a.ID, &a.ExecutionID, &a.TenantID, &a.Filename, &a.SizeBytes,
		&a.ContentType, &a.SHA256)
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// Artifact returns the tenant's artifact. Another tenant's artifact is
// ENOTFOUND, like a missing one.
func (db *DB) Artifact(ctx context.Context, tenantID, id string) (*airlock.Artifact, error) {
	ctx, done := db.bound(ctx)
	defer done()
	a, err := scanArtifact(db.read.QueryRowContext(ctx,
		`SELECT `+artifactColumns+` FROM artifacts WHERE id = $1 AND tenant_id = $2`, id, tenantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("artifact %s: %w", id, airlock.ErrNotFound)
	}
	if err != nil {
		return nil, db.wrap(ctx, "get artifact", err)
	}
	return a, nil
}
