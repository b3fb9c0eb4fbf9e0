package gvisor_test

import (
	"path/filepath"
	"testing"

	"github.com/airlockhq/airlock/backend/conformance"
	"github.com/airlockhq/airlock/internal/testenv"
)

// TestConformance runs the backend conformance suite: the gVisor backend
// passes every case, those needing a separate kernel included.
func TestConformance(t *testing.T) {
	b := testenv.GVisor(t)
	cfg := b.Config()
	conformance.Run(t, b, conformance.Options{
		Image:        testenv.Image(t, "base"),
		WatchDirs:    []string{filepath.Join(cfg.StateDir, "sandboxes")},
		CgroupParent: cfg.CgroupParent,
	})
}
