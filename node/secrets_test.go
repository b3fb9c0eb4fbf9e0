package node

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestHostSecrets(t *testing.T) {
	dir := t.TempDir()
	k := hostSecrets(dir, "metrics-key-0123456789")
	names := func() []string {
		var out []string
		for _, s := range k.Secrets() {
			out = append(out, s.Name)
		}
		slices.Sort(out)
		return out
	}
	if got := names(); !slices.Equal(got, []string{"airlockd metrics key"}) {
		t.Fatalf("secrets %q", got)
	}
	// Keys written after start are picked up at the next scan.
	if err := writeSecret(filepath.Join(dir, "default.key"), []byte("alk_0123456789abcdef\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := loadOrCreateKey(filepath.Join(dir, "signing.key")); err != nil {
		t.Fatal(err)
	}
	want := []string{"airlockd default tenant API key (default.key)", "airlockd metrics key", "airlockd signing key (signing.key)"}
	if got := names(); !slices.Equal(got, want) {
		t.Fatalf("secrets %q, want %q", got, want)
	}
	for _, s := range k.Secrets() {
		if s.Name == want[0] && string(s.Value) != "alk_0123456789abcdef" {
			t.Errorf("default key read as %q", s.Value)
		}
	}
	os.Remove(filepath.Join(dir, "default.key"))
}
