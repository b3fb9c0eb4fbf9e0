package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/airlockhq/airlock"
)

func volumePath(name string) string { return "v1/volumes/" + url.PathEscape(name) }

// CreateVolume makes a named volume of req.SizeMiB for the tenant.
func (c *Client) CreateVolume(ctx context.Context, req airlock.CreateVolumeRequest) (*airlock.Volume, error) {
	var v airlock.Volume
	if _, err := c.call(ctx, http.MethodPost, "v1/volumes", nil, req, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Volume returns one of the tenant's volumes with the sessions that have
// it mounted.
func (c *Client) Volume(ctx context.Context, name string) (*airlock.Volume, error) {
	if err := needID("volume", name); err != nil {
		return nil, err
	}
	var v airlock.Volume
	if _, err := c.call(ctx, http.MethodGet, volumePath(name), nil, nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ListVolumes returns the tenant's volumes by name.
func (c *Client) ListVolumes(ctx context.Context) ([]*airlock.Volume, error) {
	var l struct {
		Volumes []*airlock.Volume `json:"volumes"`
	}
	if _, err := c.call(ctx, http.MethodGet, "v1/volumes", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Volumes, nil
}

// DeleteVolume deletes a volume and its data; a volume a live session
// has mounted is a 409 volume-in-use.
func (c *Client) DeleteVolume(ctx context.Context, name string) error {
	if err := needID("volume", name); err != nil {
		return err
	}
	_, err := c.call(ctx, http.MethodDelete, volumePath(name), nil, nil, nil)
	return err
}
