package gvisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/wsarchive"
)

// seedWorkspace copies what the image holds under /workspace (a
// template made from a session keeps the session's workspace there,
// hidden in the sandbox by the workspace mount) into a fresh disk's
// workspace, owned by the sandbox user. An image with an empty (or no)
// /workspace costs one directory read.
func seedWorkspace(ctx context.Context, img *airlock.Image, workspace string, diskBytes int64) error {
	if img == nil || img.Rootfs == "" {
		return nil
	}
	src := filepath.Join(img.Rootfs, "workspace")
	fi, err := os.Lstat(src)
	if err != nil || !fi.IsDir() {
		return nil
	}
	f, err := os.Open(src)
	if err != nil {
		return nil
	}
	names, _ := f.Readdirnames(1)
	f.Close()
	if len(names) == 0 {
		return nil
	}
	lim := wsarchive.Limits{MaxBytes: max(diskBytes, 1<<30)}
	pr, pw := io.Pipe()
	go func() {
		_, err := wsarchive.Write(ctx, src, pw, lim)
		pw.CloseWithError(err)
	}()
	_, err = wsarchive.Extract(ctx, pr, workspace, SandboxUID, SandboxUID, lim)
	pr.CloseWithError(errors.New("stopped"))
	if err != nil {
		return fmt.Errorf("gvisor: seed the workspace from image %s: %w", img.Name, err)
	}
	return nil
}
