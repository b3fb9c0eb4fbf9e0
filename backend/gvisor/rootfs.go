package gvisor

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// RootfsInUse returns the root filesystems of the sandboxes on this
// node: those this process runs and any an earlier one left (a session
// kept over a restart, one not yet reconciled), read from their bundles.
// The image garbage collector keeps the image versions holding them.
func (b *Backend) RootfsInUse(ctx context.Context) ([]string, error) {
	return RootfsInUse(b.cfg.StateDir)
}

// RootfsInUse is Backend.RootfsInUse for the backend whose state
// directory is stateDir (<state-dir>/gvisor), for a command that runs
// beside the server: the rootfs named by every sandbox's bundle.
func RootfsInUse(stateDir string) ([]string, error) {
	dir := filepath.Join(stateDir, "sandboxes")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "bundle", "config.json"))
		if errors.Is(err, os.ErrNotExist) {
			continue // being made (its bundle is written before runsc starts) or removed
		}
		if err != nil {
			return nil, err
		}
		var s specs.Spec
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, err
		}
		if s.Root != nil && s.Root.Path != "" {
			out = append(out, s.Root.Path)
		}
	}
	return out, nil
}
