// Package python_test runs the Python SDK's tests (python3 -m unittest)
// against a real node: the in-process stack of internal/teststack, with
// its REST API on a loopback port.
package python_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/provision"
)

var skipped = regexp.MustCompile(`skipped=(\d+)`)

// TestPythonSDK runs the unit tests and the integration tests of
// sdk/python with the machine's python3. The integration tests get a
// server, a key, another tenant's key and a limit of one session per
// tenant; none of them may skip.
func TestPythonSDK(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		testreq.Skip(t, "python3 is not installed")
	}
	s := teststack.New(t, teststack.Options{
		MaxTimeout: 60 * time.Second,
		Admission:  provision.Admission{SessionsPerTenant: 1},
	})
	a := s.NewTenant(t, "python-a")
	b := s.NewTenant(t, "python-b")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "discover", "-s", "tests", "-v")
	cmd.Env = append(os.Environ(),
		"AIRLOCK_URL="+s.URL,
		"AIRLOCK_API_KEY="+a.Key,
		"AIRLOCK_TEST_OTHER_KEY="+b.Key,
		"PYTHONDONTWRITEBYTECODE=1",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("python3 -m unittest:\n%s", out.String())
	if err != nil {
		t.Fatalf("the Python SDK's tests failed: %v", err)
	}
	if m := skipped.FindSubmatch(out.Bytes()); m != nil {
		t.Errorf("%s Python tests were skipped; none may be", m[1])
	}
}
