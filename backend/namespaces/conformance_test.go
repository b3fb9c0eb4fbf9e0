package namespaces_test

import (
	"path/filepath"
	"testing"

	"github.com/airlockhq/airlock/backend/conformance"
	"github.com/airlockhq/airlock/internal/testenv"
)

// TestConformance runs the backend conformance suite. The cases that need
// a separate kernel are skipped, with the reason: this backend shares the
// host's.
func TestConformance(t *testing.T) {
	b := testenv.Namespaces(t)
	cfg := b.Config()
	conformance.Run(t, b, conformance.Options{
		Image:        testenv.Image(t, "base"),
		WatchDirs:    []string{filepath.Join(cfg.StateDir, "sandboxes")},
		CgroupParent: cfg.CgroupParent,
	})
}
