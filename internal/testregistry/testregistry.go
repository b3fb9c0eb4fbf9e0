// Package testregistry starts a real OCI registry (Debian's
// docker-registry, the CNCF distribution server) on loopback for a test,
// optionally behind htpasswd basic auth, and stops it when the test ends.
// It skips (or, with AIRLOCK_TEST_REQUIRE=1, fails) where the server is
// not installed; scripts/setup.sh --tests installs it.
package testregistry

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/airlockhq/airlock/internal/testenv/testport"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// Binary is where Debian installs the registry.
const Binary = "/usr/bin/docker-registry"

// Options of a registry.
type Options struct {
	// Username and Password, when set, put the registry behind htpasswd
	// basic auth (the registry then also hands out no anonymous access).
	Username, Password string
}

// Start runs a registry on 127.0.0.1 and returns its host:port.
func Start(t testing.TB, o Options) string {
	t.Helper()
	if _, err := os.Stat(Binary); err != nil {
		testreq.Skip(t, "skipped: docker-registry not installed; scripts/setup.sh --tests installs it")
	}
	dir := t.TempDir()
	addr := freePort(t)
	auth := ""
	if o.Username != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(o.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "htpasswd"), []byte(o.Username+":"+string(hash)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: test\n    path: %s\n", filepath.Join(dir, "htpasswd"))
	}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
%s`, filepath.Join(dir, "data"), addr, auth)
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Binary, "serve", filepath.Join(dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		logf.Close()
	})
	ok := testreq.Poll(30*time.Second, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		resp, err := http.Get("http://" + addr + "/v2/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized
	})
	select {
	case <-exited:
		ok = false
	default:
	}
	if !ok {
		b, _ := os.ReadFile(filepath.Join(dir, "registry.log"))
		t.Fatalf("the registry did not come up on %s:\n%s", addr, strings.TrimSpace(string(b)))
	}
	return addr
}

// freePort returns a loopback address no one listens on now.
func freePort(t testing.TB) string {
	t.Helper()
	return testport.Addr(t)
}
