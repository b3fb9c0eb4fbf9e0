package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/airlockhq/airlock"
)

// CreateKeyRequest is the body of POST /v1/keys.
type CreateKeyRequest struct {
	Name      string     `json:"name"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Format is "airlock" (the default) or "e2b".
	Format string `json:"format,omitempty"`
}

// CreatedKey is a new key: its record and its secret, shown this once.
type CreatedKey struct {
	*airlock.APIKey
	Key string `json:"key"`
}

// ListKeys returns the tenant's own keys, revoked ones too (GET /v1/keys).
func (c *Client) ListKeys(ctx context.Context) ([]*airlock.APIKey, error) {
	var out struct {
		Keys []*airlock.APIKey `json:"keys"`
	}
	if _, err := c.call(ctx, http.MethodGet, "v1/keys", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Keys, nil
}

// CreateKey makes a new key of the caller's tenant (POST /v1/keys).
func (c *Client) CreateKey(ctx context.Context, req CreateKeyRequest) (*CreatedKey, error) {
	k := &CreatedKey{}
	if _, err := c.call(ctx, http.MethodPost, "v1/keys", nil, req, k); err != nil {
		return nil, err
	}
	return k, nil
}

// RevokeKey revokes one of the tenant's own keys (DELETE /v1/keys/{key_id}).
func (c *Client) RevokeKey(ctx context.Context, keyID string) (*airlock.APIKey, error) {
	if err := needID("key", keyID); err != nil {
		return nil, err
	}
	var k airlock.APIKey
	if _, err := c.call(ctx, http.MethodDelete, "v1/keys/"+url.PathEscape(keyID), nil, nil, &k); err != nil {
		return nil, err
	}
	return &k, nil
}
