package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/airlockhq/airlock"
)

// CreateSnapshot saves a session's workspace, sealed, as a snapshot.
func (c *Client) CreateSnapshot(ctx context.Context, sessionID string, req airlock.CreateSnapshotRequest) (*airlock.Snapshot, error) {
	if err := needID("session", sessionID); err != nil {
		return nil, err
	}
	var s airlock.Snapshot
	if _, err := c.call(ctx, http.MethodPost, sessionPath(sessionID, "snapshots"), nil, req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

func snapshotPath(id string) string { return "v1/snapshots/" + url.PathEscape(id) }

// Snapshot returns one of the tenant's snapshots.
func (c *Client) Snapshot(ctx context.Context, id string) (*airlock.Snapshot, error) {
	if err := needID("snapshot", id); err != nil {
		return nil, err
	}
	var s airlock.Snapshot
	if _, err := c.call(ctx, http.MethodGet, snapshotPath(id), nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ListSnapshots returns a page of the tenant's snapshots, newest first;
// before is the previous page's NextCursor ("" for the first), limit 0
// the server's default.
func (c *Client) ListSnapshots(ctx context.Context, before string, limit int) (*airlock.SnapshotPage, error) {
	q := url.Values{}
	if before != "" {
		q.Set("before", before)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var p airlock.SnapshotPage
	if _, err := c.call(ctx, http.MethodGet, "v1/snapshots", q, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DeleteSnapshot deletes a snapshot and its data.
func (c *Client) DeleteSnapshot(ctx context.Context, id string) error {
	if err := needID("snapshot", id); err != nil {
		return err
	}
	_, err := c.call(ctx, http.MethodDelete, snapshotPath(id), nil, nil, nil)
	return err
}

// PauseSession saves a session to disk and frees its sandbox.
func (c *Client) PauseSession(ctx context.Context, id string) (*airlock.Session, error) {
	return c.sessionAction(ctx, id, "pause")
}

// ResumeSession restores a paused session.
func (c *Client) ResumeSession(ctx context.Context, id string) (*airlock.Session, error) {
	return c.sessionAction(ctx, id, "resume")
}

func (c *Client) sessionAction(ctx context.Context, id, action string) (*airlock.Session, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	var s airlock.Session
	if _, err := c.call(ctx, http.MethodPost, sessionPath(id, action), nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ForkSession makes new sessions from a session.
func (c *Client) ForkSession(ctx context.Context, id string, req airlock.ForkRequest) (*airlock.ForkResult, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	var r airlock.ForkResult
	if _, err := c.call(ctx, http.MethodPost, sessionPath(id, "fork"), nil, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// SessionTemplate makes a template, private to the tenant, of the
// session's filesystem (and with IncludeMemory its memory); it is
// returned building: poll Template (or stream TemplateLogs) until it is
// ready or failed.
func (c *Client) SessionTemplate(ctx context.Context, id string, req airlock.SessionTemplateRequest) (*airlock.Template, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	var t airlock.Template
	if _, err := c.call(ctx, http.MethodPost, sessionPath(id, "template"), nil, req, &t); err != nil {
		return nil, err
	}
	return &t, nil
}
