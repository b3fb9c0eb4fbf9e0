package client

import (
	"context"
	"io"
	"net/http"
	"net/url"

	"github.com/airlockhq/airlock"
)

// Templates (POST/GET/DELETE /v1/templates).

func templatePath(name string, rest ...string) string {
	p := "v1/templates/" + url.PathEscape(name)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// CreateTemplate starts a template build (POST /v1/templates); the
// answer has status building: poll Template until it is ready or failed.
func (c *Client) CreateTemplate(ctx context.Context, req airlock.CreateTemplateRequest) (*airlock.Template, error) {
	var t airlock.Template
	if _, err := c.call(ctx, http.MethodPost, "v1/templates", nil, req, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Template returns a template the tenant sees (GET /v1/templates/{name}).
func (c *Client) Template(ctx context.Context, name string) (*airlock.Template, error) {
	if err := needID("template name", name); err != nil {
		return nil, err
	}
	var t airlock.Template
	if _, err := c.call(ctx, http.MethodGet, templatePath(name), nil, nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// ListTemplates returns the tenant's templates and the operator's.
func (c *Client) ListTemplates(ctx context.Context) ([]airlock.Template, error) {
	var l struct {
		Templates []airlock.Template `json:"templates"`
	}
	if _, err := c.call(ctx, http.MethodGet, "v1/templates", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Templates, nil
}

// DeleteTemplate deletes the tenant's template.
func (c *Client) DeleteTemplate(ctx context.Context, name string) error {
	if err := needID("template name", name); err != nil {
		return err
	}
	_, err := c.call(ctx, http.MethodDelete, templatePath(name), nil, nil, nil)
	return err
}

// UploadTemplateContext uploads a tar (a build context, an OCI layout or
// a docker save archive) for a later CreateTemplate's context.
func (c *Client) UploadTemplateContext(ctx context.Context, r io.Reader, size int64) (*airlock.TemplateContext, error) {
	req, err := c.newRequest(ctx, http.MethodPost, c.endpoint("v1/templates/contexts", nil), nil)
	if err != nil {
		return nil, err
	}
	req.Body, req.ContentLength = io.NopCloser(r), size
	req.Header.Set("Content-Type", "application/x-tar")
	var tc airlock.TemplateContext
	if _, err := c.send(req, &tc); err != nil {
		return nil, err
	}
	return &tc, nil
}

// TemplateLogs copies a template's build log to w as it is written, until
// the build is over (GET /v1/templates/{name}/logs, text/plain).
func (c *Client) TemplateLogs(ctx context.Context, name string, w io.Writer) error {
	if err := needID("template name", name); err != nil {
		return err
	}
	req, err := c.newRequest(ctx, http.MethodGet, c.endpoint(templatePath(name, "logs"), nil), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return problemError(resp)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}
