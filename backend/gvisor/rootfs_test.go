package gvisor_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/airlockhq/airlock/backend/gvisor"
)

// TestRootfsInUse reads the rootfs of every sandbox's bundle, skips a
// sandbox whose bundle is not written yet, and fails on a bundle it
// cannot read rather than report less than is in use.
func TestRootfsInUse(t *testing.T) {
	dir := t.TempDir()
	if got, err := gvisor.RootfsInUse(filepath.Join(dir, "none")); err != nil || len(got) != 0 {
		t.Fatalf("no state directory: %v, %v", got, err)
	}
	bundle := func(id, body string) {
		p := filepath.Join(dir, "sandboxes", id, "bundle")
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if body != "" {
			if err := os.WriteFile(filepath.Join(p, "config.json"), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	bundle("a", `{"ociVersion": "1.0.2", "root": {"path": "/state/images/base-111111111111/rootfs", "readonly": true}}`)
	bundle("b", `{"ociVersion": "1.0.2", "root": {"path": "/state/templates/0123/rootfs", "readonly": true}}`)
	bundle("c", "") // being made
	got, err := gvisor.RootfsInUse(dir)
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []string{"/state/images/base-111111111111/rootfs", "/state/templates/0123/rootfs"}) {
		t.Fatalf("RootfsInUse = %v, %v", got, err)
	}
	bundle("d", "{not json")
	if _, err := gvisor.RootfsInUse(dir); err == nil {
		t.Fatal("a bundle that cannot be read was ignored")
	}
}
