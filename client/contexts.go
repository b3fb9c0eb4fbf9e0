package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/airlockhq/airlock"
)

// CreateContext starts a persistent interpreter ("python" or "node") in a
// session (POST /v1/sessions/{id}/contexts).
func (c *Client) CreateContext(ctx context.Context, id string, language airlock.ContextLanguage) (*airlock.CodeContext, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	var cc airlock.CodeContext
	if _, err := c.call(ctx, http.MethodPost, sessionPath(id, "contexts"), nil, airlock.CreateContextRequest{Language: language}, &cc); err != nil {
		return nil, err
	}
	return &cc, nil
}

// ListContexts lists a session's code contexts
// (GET /v1/sessions/{id}/contexts).
func (c *Client) ListContexts(ctx context.Context, id string) ([]*airlock.CodeContext, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	var l struct {
		Contexts []*airlock.CodeContext `json:"contexts"`
	}
	if _, err := c.call(ctx, http.MethodGet, sessionPath(id, "contexts"), nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Contexts, nil
}

func contextPath(id, cid string, rest ...string) string {
	return sessionPath(id, append([]string{"contexts", url.PathEscape(cid)}, rest...)...)
}

// DeleteContext ends a code context
// (DELETE /v1/sessions/{id}/contexts/{cid}).
func (c *Client) DeleteContext(ctx context.Context, id, cid string) error {
	if err := needID("session", id); err != nil {
		return err
	}
	if err := needID("context", cid); err != nil {
		return err
	}
	_, err := c.call(ctx, http.MethodDelete, contextPath(id, cid), nil, nil, nil)
	return err
}

// RestartContext starts a code context afresh
// (POST /v1/sessions/{id}/contexts/{cid}/restart).
func (c *Client) RestartContext(ctx context.Context, id, cid string) (*airlock.CodeContext, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	if err := needID("context", cid); err != nil {
		return nil, err
	}
	var cc airlock.CodeContext
	if _, err := c.call(ctx, http.MethodPost, contextPath(id, cid, "restart"), nil, nil, &cc); err != nil {
		return nil, err
	}
	return &cc, nil
}

// RunCell runs a cell in a code context and returns its result
// (POST /v1/sessions/{id}/contexts/{cid}/run). An exception in the cell
// is a result (CellResult.Error), not an error.
func (c *Client) RunCell(ctx context.Context, id, cid string, req airlock.RunCellRequest) (*airlock.CellResult, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	if err := needID("context", cid); err != nil {
		return nil, err
	}
	var r airlock.CellResult
	if _, err := c.call(ctx, http.MethodPost, contextPath(id, cid, "run"), nil, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// RunCellStreaming runs a cell and writes its stdout and stderr as they
// come (nil discards); it returns the result at the end.
func (c *Client) RunCellStreaming(ctx context.Context, id, cid string, req airlock.RunCellRequest, stdout, stderr io.Writer) (*airlock.CellResult, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	if err := needID("context", cid); err != nil {
		return nil, err
	}
	var r airlock.CellResult
	err := c.stream(ctx, contextPath(id, cid, "run"), req, "result", &r, func(ev event) error {
		switch ev.name {
		case "stdout", "stderr":
			b, err := decodeChunk(ev.data)
			if err != nil {
				return err
			}
			w := stdout
			if ev.name == "stderr" {
				w = stderr
			}
			if w != nil {
				w.Write(b)
			}
		case "start":
			if !json.Valid(ev.data) {
				return fmt.Errorf("%w: start event is not JSON", ErrBadResponse)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &r, nil
}
