package image

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/airlockhq/airlock"
)

// ManifestFile is the name of the manifest in a final image directory.
const ManifestFile = "manifest.json"

// Manifest describes a built image; it is written last, so a directory
// with a manifest is complete.
type Manifest struct {
	Name        string            `json:"name"`
	Hash        string            `json:"hash"`
	StageHash   string            `json:"stage_hash"`
	Recipe      string            `json:"recipe"`
	Spec        airlock.ImageSpec `json:"spec"`
	SizeBytes   int64             `json:"size_bytes"`
	Env         []string          `json:"env"`
	BuiltAt     time.Time         `json:"built_at"`
	AgentSHA256 string            `json:"agent_sha256"`
	// SecretScan is what the scan of the rootfs before publishing read
	// and allowed (no finding refused it, or it would not be here).
	SecretScan *SecretScan `json:"secret_scan,omitempty"`
}

// image returns the airlock.Image of the manifest in dir.
func (m *Manifest) image(dir string) *airlock.Image {
	return &airlock.Image{
		Name:      m.Name,
		Hash:      m.Hash,
		Rootfs:    filepath.Join(dir, "rootfs"),
		SizeBytes: m.SizeBytes,
		Env:       append([]string(nil), m.Env...),
		BuiltAt:   m.BuiltAt,
	}
}

// readManifest reads dir/manifest.json and checks that dir/rootfs exists.
func readManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestFile), err)
	}
	if m.Name == "" || len(m.Hash) < ShortLen {
		return nil, fmt.Errorf("%s: no name or hash", filepath.Join(dir, ManifestFile))
	}
	if fi, err := os.Stat(filepath.Join(dir, "rootfs")); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s: no rootfs", dir)
	}
	return &m, nil
}

// writeJSON writes v to path through a temporary file and fsync.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// envList returns env as sorted KEY=VALUE strings.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}
