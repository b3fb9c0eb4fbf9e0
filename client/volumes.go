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

// CreateVolumeSnapshot seals a copy of the volume's files (req may be
// zero). A volume a session writes is a 409 volume-busy.
func (c *Client) CreateVolumeSnapshot(ctx context.Context, volume string, req airlock.CreateVolumeSnapshotRequest) (*airlock.VolumeSnapshot, error) {
	if err := needID("volume", volume); err != nil {
		return nil, err
	}
	var s airlock.VolumeSnapshot
	if _, err := c.call(ctx, http.MethodPost, volumePath(volume)+"/snapshots", nil, req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ListVolumeSnapshots returns the volume's snapshots, newest first.
func (c *Client) ListVolumeSnapshots(ctx context.Context, volume string) ([]*airlock.VolumeSnapshot, error) {
	if err := needID("volume", volume); err != nil {
		return nil, err
	}
	var l airlock.VolumeSnapshotList
	if _, err := c.call(ctx, http.MethodGet, volumePath(volume)+"/snapshots", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Snapshots, nil
}

// DeleteVolumeSnapshot deletes one of the volume's snapshots and its
// data.
func (c *Client) DeleteVolumeSnapshot(ctx context.Context, volume, id string) error {
	if err := needID("volume", volume); err != nil {
		return err
	}
	if err := needID("snapshot", id); err != nil {
		return err
	}
	_, err := c.call(ctx, http.MethodDelete, volumePath(volume)+"/snapshots/"+url.PathEscape(id), nil, nil, nil)
	return err
}
