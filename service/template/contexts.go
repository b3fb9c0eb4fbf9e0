package template

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// UploadContext stores body (a tar: a build context, an OCI layout or a
// docker save archive) as a context of the tenant, at most
// Config.MaxContextBytes.
func (s *Service) UploadContext(ctx context.Context, tenant *airlock.Tenant, body io.Reader) (*airlock.TemplateContext, error) {
	tc := &airlock.TemplateContext{ID: airlock.NewID(), TenantID: tenantID(tenant), CreatedAt: time.Now().UTC()}
	if err := os.MkdirAll(s.contextsDir(), 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(s.contextsDir(), ".upload-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(body, s.cfg.MaxContextBytes+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, airlock.Problem(airlock.EINVALID, "invalid-template-context", "reading the upload: %v", err)
	}
	if n > s.cfg.MaxContextBytes {
		return nil, airlock.Problem(airlock.ETOOLARGE, "template-context-too-large", "a context may be at most %d bytes", s.cfg.MaxContextBytes)
	}
	if n == 0 {
		return nil, airlock.Problem(airlock.EINVALID, "invalid-template-context", "the upload is empty: send a tar as the request body")
	}
	tc.SizeBytes, tc.SHA256 = n, hex.EncodeToString(h.Sum(nil))
	meta, _ := json.Marshal(tc)
	if err := os.WriteFile(s.contextPath(tc.ID)+".json", meta, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), s.contextPath(tc.ID)); err != nil {
		os.Remove(s.contextPath(tc.ID) + ".json")
		return nil, err
	}
	return tc, nil
}

func (s *Service) contextsDir() string          { return filepath.Join(s.dir, "contexts") }
func (s *Service) contextPath(id string) string { return filepath.Join(s.contextsDir(), id+".tar") }

// contextFor returns the path of the tenant's context id; another
// tenant's, or one that does not exist, is not found.
func (s *Service) contextFor(tenant *airlock.Tenant, id string) (string, error) {
	notFound := airlock.Problem(airlock.ENOTFOUND, "template-context-not-found", "context %q not found: upload it with POST /v1/templates/contexts", id)
	if id == "" || len(id) > 64 || strings.ContainsAny(id, "/\\.") {
		return "", notFound
	}
	b, err := os.ReadFile(s.contextPath(id) + ".json")
	if errors.Is(err, os.ErrNotExist) {
		return "", notFound
	}
	if err != nil {
		return "", err
	}
	var tc airlock.TemplateContext
	if err := json.Unmarshal(b, &tc); err != nil {
		return "", fmt.Errorf("context %s: %w", id, err)
	}
	if tc.TenantID != tenantID(tenant) {
		return "", notFound
	}
	return s.contextPath(id), nil
}

func tenantID(t *airlock.Tenant) string {
	if t == nil {
		return ""
	}
	return t.ID
}
