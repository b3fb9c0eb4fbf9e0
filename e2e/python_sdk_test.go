package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

var pythonSkipped = regexp.MustCompile(`skipped=(\d+)`)

// TestPythonSDK runs the Python SDK's unit tests and its integration
// tests (sdk/python, python3 -m unittest, the machine's python3) against
// a real airlockd: the binary, on a state directory of its own, with a
// limit of one live session per tenant (the tests check the quota
// refusal) and a second tenant's key (they check another tenant's
// session is 404). None of the Python tests may skip.
func TestPythonSDK(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		testreq.Skip(t, "python3 is not installed")
	}
	n := newTestNode(t, nodeOptions{name: "python-sdk", images: []string{"base", "python-ds"}})
	tmp := n.dir
	// A master key, so the SDK's snapshot, pause and resume calls run
	// for real.
	masterKey := filepath.Join(tmp, "master.key")
	var mk [32]byte
	rand.Read(mk[:])
	if err := os.WriteFile(masterKey, []byte(hex.EncodeToString(mk[:])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := n.start("--pool-max", "0", "--warm", "", "--warm-sessions", "", "--no-snapshots", "--max-sessions-per-tenant", "1",
		"--master-key-file", masterKey)
	other := newTenantKey(t, tmp, "python-other", airlock.NewAPIKey)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "discover", "-s", "tests", "-v")
	cmd.Dir = filepath.Join("..", "sdk", "python") // go test runs in the package directory
	cmd.Env = append(os.Environ(),
		"AIRLOCK_URL="+d.url,
		"AIRLOCK_API_KEY="+n.key(),
		"AIRLOCK_TEST_OTHER_KEY="+other,
		"PYTHONDONTWRITEBYTECODE=1",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("python3 -m unittest:\n%s", out.String())
	if err != nil {
		t.Fatalf("the Python SDK's tests failed: %v", err)
	}
	if m := pythonSkipped.FindSubmatch(out.Bytes()); m != nil {
		t.Errorf("%s Python tests were skipped; none may be", m[1])
	}
	d.stop(t)
}
