package oneshot

import (
	"testing"

	"github.com/airlockhq/airlock/service/guard"
)

// The light Python only for code whose imports are known and light.
func TestNeedsHeavyPython(t *testing.T) {
	for _, tt := range []struct {
		name  string
		imp   guard.Imports
		heavy bool
	}{
		{"no imports", guard.Imports{Parsed: true}, false},
		{"light", guard.Imports{Parsed: true, Modules: []string{"json", "os.path"}}, false},
		{"numpy", guard.Imports{Parsed: true, Modules: []string{"json", "numpy"}}, true},
		{"a heavy submodule", guard.Imports{Parsed: true, Modules: []string{"matplotlib.pyplot"}}, true},
		{"a light name that starts like a heavy one", guard.Imports{Parsed: true, Modules: []string{"numpyish"}}, false},
		{"dynamic", guard.Imports{Parsed: true, Dynamic: true}, true},
		{"not parsed", guard.Imports{}, true},
	} {
		if got := needsHeavyPython(tt.imp); got != tt.heavy {
			t.Errorf("%s: heavy %v, want %v", tt.name, got, tt.heavy)
		}
	}
}
