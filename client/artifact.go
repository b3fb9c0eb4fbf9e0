package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/airlockhq/airlock"
)

// DownloadArtifact writes the bytes of an artifact to w and returns how
// many it wrote. It fetches a.URL, resolved against the base URL if
// relative; the API key is sent only if that URL has the base URL's scheme
// and host (a signed URL needs no key).
//
// When a carries metadata from the server (SHA256 set, or SizeBytes > 0),
// the body must match it: more than SizeBytes bytes stops the copy, and a
// size or checksum mismatch is an error wrapping ErrBadResponse. Bytes
// already written to w are then not to be trusted: write to a temporary
// file and keep it only on success.
func (c *Client) DownloadArtifact(ctx context.Context, a airlock.Artifact, w io.Writer) (int64, error) {
	if a.URL == "" {
		return 0, airlock.Errorf(airlock.EINVALID, "client: artifact %q has no URL", a.Filename)
	}
	ref, err := url.Parse(a.URL)
	if err != nil {
		return 0, airlock.Errorf(airlock.EINVALID, "client: artifact URL does not parse: %v", err)
	}
	u := c.base.ResolveReference(ref)
	if u.Scheme != "http" && u.Scheme != "https" {
		return 0, airlock.Errorf(airlock.EINVALID, "client: artifact URL must be http or https, not %q", u.Scheme)
	}
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

	checked := a.SHA256 != "" || a.SizeBytes > 0
	var body io.Reader = resp.Body
	var h hash.Hash
	if checked {
		body = io.LimitReader(body, a.SizeBytes+1)
		h = sha256.New()
		w = io.MultiWriter(w, h)
	}
	n, err := io.Copy(w, body)
	if err != nil {
		return n, fmt.Errorf("client: download %q: %w", a.Filename, err)
	}
	if !checked {
		return n, nil
	}
	if n > a.SizeBytes {
		return n, fmt.Errorf("client: download %q: %w: more than the %d bytes announced", a.Filename, ErrBadResponse, a.SizeBytes)
	}
	if n < a.SizeBytes {
		return n, fmt.Errorf("client: download %q: %w: got %d bytes, want %d", a.Filename, ErrBadResponse, n, a.SizeBytes)
	}
	if a.SHA256 != "" {
		if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, a.SHA256) {
			return n, fmt.Errorf("client: download %q: %w: sha256 %s, want %s", a.Filename, ErrBadResponse, got, printable(a.SHA256))
		}
	}
	return n, nil
}
