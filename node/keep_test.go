package node

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/seal"
)

// keyStore is a seal.KeyStore holding fixed keys.
type keyStore struct{ keys []*seal.TenantKey }

func (s *keyStore) TenantKey(context.Context, string) (*seal.TenantKey, error) {
	return nil, airlock.ErrNotFound
}
func (s *keyStore) CreateTenantKey(_ context.Context, k *seal.TenantKey) (*seal.TenantKey, error) {
	return k, nil
}
func (s *keyStore) TenantKeys(context.Context) ([]*seal.TenantKey, error) { return s.keys, nil }
func (s *keyStore) RewrapTenantKey(context.Context, string, string, string, string, []byte, time.Time) error {
	return nil
}

// A single node given no master key makes <state>/master.key (mode
// 0600) once, says to back it up, and uses the same key at every later
// start; it makes none when the store's data keys are wrapped under
// another key.
func TestLocalMasterKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	k1, err := localMasterKey(ctx, dir, &keyStore{}, logger)
	if err != nil || k1 == nil {
		t.Fatalf("first start: %v, %v", k1, err)
	}
	path := filepath.Join(dir, MasterKeyFile)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", path, fi, err)
	}
	if !strings.Contains(logs.String(), "back it up") || !strings.Contains(logs.String(), path) {
		t.Errorf("no log line says to back up the key:\n%s", logs.String())
	}
	k2, err := localMasterKey(ctx, dir, &keyStore{keys: []*seal.TenantKey{{MasterKeyID: k1.ID()}}}, logger)
	if err != nil || k2 == nil || k2.ID() != k1.ID() {
		t.Fatalf("second start: %v, %v; want the key of the first", k2, err)
	}

	// A store whose data keys an earlier, given, key wraps: no new key.
	other := t.TempDir()
	logs.Reset()
	k3, err := localMasterKey(ctx, other, &keyStore{keys: []*seal.TenantKey{{MasterKeyID: "mk-0123456789abcdef"}}}, logger)
	if err != nil || k3 != nil {
		t.Fatalf("store with foreign data keys: %v, %v; want no key", k3, err)
	}
	if _, err := os.Stat(filepath.Join(other, MasterKeyFile)); !os.IsNotExist(err) {
		t.Errorf("a key file was made: %v", err)
	}
	if !strings.Contains(logs.String(), "mk-0123456789abcdef") {
		t.Errorf("the warning does not name the key:\n%s", logs.String())
	}

	// Only on a single node, and only with Generate.
	for name, c := range map[string]struct {
		gen, single bool
	}{"fleet": {true, false}, "off": {false, true}} {
		d := t.TempDir()
		kc, err := KeepConfig{Generate: c.gen, SnapshotQuotaMiB: 1, MaxPausedAge: time.Hour}.config(ctx, d, c.single, nil, nil, logger)
		if err != nil || kc.Keys != nil {
			t.Errorf("%s: %+v, %v; want keep off", name, kc, err)
		}
		if _, err := os.Stat(filepath.Join(d, MasterKeyFile)); !os.IsNotExist(err) {
			t.Errorf("%s: a key file was made", name)
		}
	}
}
