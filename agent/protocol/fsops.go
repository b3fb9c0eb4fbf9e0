package protocol

import (
	"context"
	"fmt"
)

// File operations beyond put, get, list, stat and remove, for front-ends
// that manage a sandbox's files as a file system (the E2B API):
//
//   - OpMkdir makes Request.Path and any missing parents (mkdir -p) and
//     answers with its FileInfo; a directory already there is the error
//     "exists", anything else there "invalid".
//   - OpMove renames Request.Path to Request.Dest (both under the roots,
//     missing parents of Dest made) and answers with the FileInfo at
//     Dest; it replaces a file at Dest like rename(2).
//   - OpRemove with Request.Recursive removes a file, or a directory with
//     everything below it; symlinks inside are removed, never followed.
//
// Every path is walked as for the other file operations: one component
// at a time, never through a symlink.
const (
	OpMkdir Op = "mkdir"
	OpMove  Op = "move"
)

func (r *Request) validateMove() error {
	if _, _, err := CleanPath(r.Path); err != nil {
		return err
	}
	if _, _, err := CleanPath(r.Dest); err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	return nil
}

// Mkdir makes a directory and its missing parents and returns its info.
// A directory already at path is a *RemoteError with code "exists".
func (c *Client) Mkdir(ctx context.Context, path string) (*FileInfo, error) {
	r, err := c.roundTrip(ctx, Request{Op: OpMkdir, Path: path})
	if err != nil {
		return nil, err
	}
	if r.Info == nil {
		return nil, fmt.Errorf("protocol: mkdir response without info")
	}
	return r.Info, nil
}

// Move renames src to dst and returns the info of dst.
func (c *Client) Move(ctx context.Context, src, dst string) (*FileInfo, error) {
	req := Request{Op: OpMove, Path: src, Dest: dst}
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("protocol: %w", err)
	}
	r, err := c.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	if r.Info == nil {
		return nil, fmt.Errorf("protocol: move response without info")
	}
	return r.Info, nil
}

// RemoveAll removes a file or a directory tree.
func (c *Client) RemoveAll(ctx context.Context, path string) error {
	_, err := c.roundTrip(ctx, Request{Op: OpRemove, Path: path, Recursive: true})
	return err
}
