package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/airlockhq/airlock"
)

// PutFile uploads r into a file of a session, streaming it
// (PUT /v1/sessions/{id}/files?path=). size is r's length if known (then
// it is sent as Content-Length, and the server refuses a file larger than
// the session's disk at once), or -1. The file is replaced as a whole
// when the upload is complete; a failed upload leaves nothing.
func (c *Client) PutFile(ctx context.Context, id, path string, r io.Reader, size int64) (*airlock.PutFileResult, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	u := c.endpoint(sessionPath(id, "files"), url.Values{"path": {path}})
	req, err := c.newRequest(ctx, http.MethodPut, u, nil)
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = http.NoBody
	}
	req.Body = io.NopCloser(r)
	req.ContentLength = size
	if size == 0 {
		req.Body = http.NoBody
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	var res airlock.PutFileResult
	if _, err := c.send(req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// GetFile downloads a file of a session into w, streaming it
// (GET /v1/sessions/{id}/files?path=), and returns how many bytes it
// wrote. A body shorter or longer than the announced Content-Length is an
// error wrapping ErrBadResponse (the bytes written are then incomplete).
func (c *Client) GetFile(ctx context.Context, id, path string, w io.Writer) (int64, error) {
	if err := needID("session", id); err != nil {
		return 0, err
	}
	u := c.endpoint(sessionPath(id, "files"), url.Values{"path": {path}})
	req, err := c.newRequest(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 0, problemError(resp)
	}
	var body io.Reader = resp.Body
	if resp.ContentLength >= 0 {
		body = io.LimitReader(resp.Body, resp.ContentLength+1)
	}
	n, err := io.Copy(w, body)
	if err != nil {
		return n, fmt.Errorf("client: download %s: %w", path, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("client: download %s: %w: %d bytes, %d announced", path, ErrBadResponse, n, resp.ContentLength)
	}
	return n, nil
}

// ListFiles lists a directory of a session ("" for the workspace)
// (GET /v1/sessions/{id}/files?list=1).
func (c *Client) ListFiles(ctx context.Context, id, path string) (*airlock.FileList, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	q := url.Values{"list": {"1"}}
	if path != "" {
		q.Set("path", path)
	}
	var l airlock.FileList
	if _, err := c.call(ctx, http.MethodGet, sessionPath(id, "files"), q, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// DeleteFile removes a file or an empty directory of a session
// (DELETE /v1/sessions/{id}/files?path=).
func (c *Client) DeleteFile(ctx context.Context, id, path string) error {
	if err := needID("session", id); err != nil {
		return err
	}
	_, err := c.call(ctx, http.MethodDelete, sessionPath(id, "files"), url.Values{"path": {path}}, nil, nil)
	return err
}
