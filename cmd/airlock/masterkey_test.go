package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/seal"
)

// generate, id and rotate: after a rotation the data keys are wrapped
// under the new master key alone, and what was sealed before opens.
func TestMasterKeyRotate(t *testing.T) {
	cliEnv(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	keys := t.TempDir()
	oldFile, newFile := filepath.Join(keys, "old"), filepath.Join(keys, "new")
	out, errs, code := runCLI(t, runMasterKey, "", "generate", oldFile)
	if code != 0 || !strings.HasPrefix(out, "mk-") {
		t.Fatalf("generate: %d %q %q", code, out, errs)
	}
	if fi, _ := os.Stat(oldFile); fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v", fi.Mode().Perm())
	}
	if id, _, _ := runCLI(t, runMasterKey, "", "id", oldFile); id != out {
		t.Errorf("id %q, generate said %q", id, out)
	}
	if _, _, code := runCLI(t, runMasterKey, "", "generate", oldFile); code == 0 {
		t.Error("generate overwrote a key file")
	}
	runCLI(t, runMasterKey, "", "generate", newFile)
	runCLI(t, runTenant, "", "create", "acme", "--state-dir", dir)

	// A snapshot's worth of data sealed under the old key's data key.
	db, err := openStore(ctx, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	tn, err := db.TenantByName(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	oldKey, _ := seal.LoadMasterKey(oldFile)
	newKey, _ := seal.LoadMasterKey(newFile)
	k1, _ := seal.NewKeys(db, oldKey)
	keyID, dek, err := k1.DataKey(ctx, tn.ID)
	if err != nil {
		t.Fatal(err)
	}
	var sealed bytes.Buffer
	w, _ := seal.NewWriter(&sealed, dek, keyID, []byte("aad"))
	io.WriteString(w, "the workspace")
	w.Close()
	db.Close()

	// To the key it is wrapped under already: nothing to do.
	if out, errs, code := runCLI(t, runMasterKey, "", "rotate", "--from", newFile, "--to", oldFile, "--state-dir", dir); code != 0 || !strings.Contains(out, "re-wrapped 0 data keys") {
		t.Errorf("rotate to the current key: %d %q %q", code, out, errs)
	}
	out, errs, code = runCLI(t, runMasterKey, "", "rotate", "--from", oldFile, "--to", newFile, "--state-dir", dir)
	if code != 0 || !strings.Contains(out, "re-wrapped 1 data keys") {
		t.Fatalf("rotate: %d %q %q", code, out, errs)
	}
	out, _, code = runCLI(t, runMasterKey, "", "rotate", "--from", oldFile, "--to", newFile, "--state-dir", dir)
	if code != 0 || !strings.Contains(out, "re-wrapped 0 data keys") || !strings.Contains(out, "(1 were already)") {
		t.Errorf("second rotate: %d %q", code, out)
	}
	db, err = openStore(ctx, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	onlyNew, _ := seal.NewKeys(db, newKey)
	dek2, err := onlyNew.DataKeyByID(ctx, tn.ID, keyID)
	if err != nil {
		t.Fatalf("the new key alone: %v", err)
	}
	r, err := seal.NewReader(bytes.NewReader(sealed.Bytes()), func(string) ([]byte, error) { return dek2, nil }, []byte("aad"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(r); err != nil || string(got) != "the workspace" {
		t.Fatalf("after rotation: %q %v", got, err)
	}
	onlyOld, _ := seal.NewKeys(db, oldKey)
	if _, err := onlyOld.DataKeyByID(ctx, tn.ID, keyID); err == nil {
		t.Error("the old key still unwraps after rotation")
	}
	if _, errs, code := runCLI(t, runMasterKey, "", "rotate", "--from", oldFile, "--state-dir", dir); code != 2 {
		t.Errorf("rotate without --to: %d %q", code, errs)
	}
}
