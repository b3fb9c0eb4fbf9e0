package microvm_test

import (
	"path/filepath"
	"testing"

	"github.com/airlockhq/airlock/conformance"
	"github.com/airlockhq/airlock/internal/testenv"
)

// TestConformance runs the backend conformance suite on microVMs (under
// TCG here: the suite's own timeouts are long enough for its boots).
func TestConformance(t *testing.T) {
	b := testenv.MicroVM(t)
	cfg := b.Config()
	conformance.Run(t, b, conformance.Options{
		Image:        testenv.Image(t, "base"),
		WatchDirs:    []string{filepath.Join(cfg.StateDir, "vms")},
		CgroupParent: cfg.CgroupParent,
	})
}
