package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/airlockhq/airlock"
)

var execLookPath = exec.LookPath

// bootstrapTenant creates tenant "default" and its key on an empty store
// and writes the key to <state>/default.key (mode 0600). On a store that
// several nodes share, the node that creates it first has the key; the
// others find the tenant made and leave it.
func bootstrapTenant(ctx context.Context, store airlock.Store, stateDir string, logger *slog.Logger) error {
	n, err := store.CountTenants(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	t := &airlock.Tenant{ID: airlock.NewID(), Name: "default", CreatedAt: time.Now().UTC()}
	if err := store.CreateTenant(ctx, t); airlock.ErrorCode(err) == airlock.ECONFLICT {
		logger.Info("tenant default was created by another node at the same time; its key is on that node")
		return nil
	} else if err != nil {
		return err
	}
	secret, key := airlock.NewAPIKey(t.ID, airlock.NewID(), time.Now())
	key.Name = "default"
	path := filepath.Join(stateDir, "default.key")
	if err := writeSecret(path, []byte(secret+"\n")); err != nil {
		return err
	}
	if err := store.CreateAPIKey(ctx, key); err != nil {
		os.Remove(path)
		return err
	}
	logger.Info("created tenant default; its API key is in the key file", "key_file", path)
	return nil
}

// bootstrapAdmin makes an operator (admin) key when the store has none
// and writes it to <state>/admin.key (mode 0600), beside default.key: on
// the first start, and on the first start of a store made before keys
// had roles. On a store that several nodes share, the node that makes it
// has the file.
func bootstrapAdmin(ctx context.Context, store airlock.Store, stateDir string, logger *slog.Logger) error {
	keys, err := store.ListAPIKeys(ctx, airlock.KeyFilter{Role: airlock.RoleAdmin})
	if err != nil {
		return err
	}
	if len(keys) > 0 {
		return nil
	}
	secret, key := airlock.NewAPIKey("", airlock.NewID(), time.Now())
	key.Role, key.Name = airlock.RoleAdmin, "bootstrap"
	path := filepath.Join(stateDir, "admin.key")
	if err := writeSecret(path, []byte(secret+"\n")); err != nil {
		return err
	}
	if err := store.CreateAPIKey(ctx, key); err != nil {
		os.Remove(path)
		return err
	}
	logger.Info("created an operator key; it is in the key file", "key_file", path)
	return nil
}

// loadOrCreateKey returns the 32-byte key in path, creating it if absent.
func loadOrCreateKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if len(b) < 32 {
			return nil, fmt.Errorf("%s is shorter than 32 bytes", path)
		}
		return b, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	if err := writeSecret(path, b); err != nil {
		return nil, err
	}
	return b, nil
}

// writeSecret writes a file readable by root only, atomically.
func writeSecret(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
