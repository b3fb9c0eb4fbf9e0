package provision_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/service/broker"
	"github.com/airlockhq/airlock/service/provision"
)

// snapshotBuilds reads airlock_snapshot_builds_total{result}.
func snapshotBuilds(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "airlock_snapshot_builds_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// syncBuffer collects what the provisioner logs, from its goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startWarm makes a provisioner on real runsc that keeps a base snapshot
// of img's Python, scanning with known, and starts it.
func startWarm(t *testing.T, img *airlock.Image, known *secretscan.Known) (*provision.Provisioner, *prometheus.Registry, string, *syncBuffer) {
	t.Helper()
	return startWarmIn(t, filepath.Join(t.TempDir(), "snapshots"), img, known)
}

// startWarmIn is startWarm with the snapshots in snaps.
func startWarmIn(t *testing.T, snaps string, img *airlock.Image, known *secretscan.Known) (*provision.Provisioner, *prometheus.Registry, string, *syncBuffer) {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs := &syncBuffer{}
	p, err := provision.New(provision.Config{
		Backends:    []airlock.Backend{testenv.GVisor(t)},
		SnapshotDir: snaps,
		Pool:        provision.PoolConfig{Disabled: true},
		Secrets:     secretscan.Default().WithKnown(known),
		Metrics:     reg,
		Logger:      slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeProvisioner(p) })
	p.Warm(img, airlock.Python, airlock.DefaultLimits)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p, reg, snaps, logs
}

func closeProvisioner(p *provision.Provisioner) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p.Close(ctx)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// snapshotDirs lists the finished snapshots in dir.
func snapshotDirs(t *testing.T, dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".tmp-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestSnapshotRefusesEnvSecret: a credential in what airlockd passes
// into sandboxes (the image's environment, which every sandbox and its
// warm runtime get) refuses the base snapshot, whether a pattern finds
// it or it is the broker's credential itself: the snapshot is not kept,
// the refusal is logged naming the variable without its value and
// counted, and requests for the key start cold.
func TestSnapshotRefusesEnvSecret(t *testing.T) {
	base := testenv.Image(t, "python-ds")
	brokerValue := "brk-" + randomHex(20)
	bk, err := broker.New(broker.Config{
		Scopes: []broker.Scope{{
			Name: "upstream", Upstream: "https://api.example.test", Methods: []string{"GET"}, Paths: []string{"/**"},
			Credential: broker.Credential{Env: "AIRLOCK_TEST_UPSTREAM_TOKEN"},
		}},
		Record: func(*airlock.EgressEvent) {},
		Getenv: func(k string) string {
			if k == "AIRLOCK_TEST_UPSTREAM_TOKEN" {
				return brokerValue
			}
			return ""
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	known := &secretscan.Known{}
	known.AddSource(func() []secretscan.Secret {
		var out []secretscan.Secret
		for name, v := range bk.Credentials() {
			out = append(out, secretscan.Secret{Name: "broker credential of scope " + name, Value: []byte(v)})
		}
		return out
	})
	for _, c := range []struct {
		name, env, want, secret string
	}{
		{"aws key", "AWS_SECRET_ACCESS_KEY=" + randomHex(10) + "Kq9Z" + randomHex(8), "env AWS_SECRET_ACCESS_KEY: secret-variable", ""},
		{"broker credential", "UPSTREAM=" + brokerValue, "env UPSTREAM: host-secret: <broker credential of scope upstream>", brokerValue},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := *base
			img.Env = append(slices.Clone(base.Env), c.env)
			p, reg, snaps, logs := startWarm(t, &img, known)
			// Counted, then logged.
			testreq.Eventually(t, 2*time.Minute, "the snapshot refused", func() bool {
				return snapshotBuilds(t, reg, "refused") == 1 && strings.Contains(logs.String(), "base snapshot refused")
			})
			if got := snapshotDirs(t, snaps); len(got) > 0 {
				t.Errorf("snapshots kept: %v", got)
			}
			if snapshotBuilds(t, reg, "built") != 0 {
				t.Error("a snapshot was built")
			}
			out := logs.String()
			if !strings.Contains(out, "base snapshot refused") || !strings.Contains(out, c.want) {
				t.Errorf("the log does not name the variable (%q):\n%s", c.want, out)
			}
			_, value, _ := strings.Cut(c.env, "=")
			if strings.Contains(out, value) {
				t.Errorf("the log shows the value:\n%s", out)
			}
			// The key boots cold; the refusal is not retried.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			tk, err := p.Admit(ctx, provision.Claim{Kind: provision.OneShot, Tenant: &airlock.Tenant{ID: "t", Name: "t"}})
			if err != nil {
				t.Fatal(err)
			}
			l, err := tk.Acquire(ctx, provision.Spec{ID: "secret-" + randomHex(6), Image: &img, Language: airlock.Python, Limits: airlock.DefaultLimits})
			if err != nil {
				t.Fatal(err)
			}
			if l.StartSource() != airlock.StartCold {
				t.Errorf("started %s, want cold", l.StartSource())
			}
			if err := l.Destroy(ctx); err != nil {
				t.Error(err)
			}
			if n := snapshotBuilds(t, reg, "refused"); n != 1 {
				t.Errorf("refused %v times, want once", n)
			}
		})
	}
}

// TestSnapshotScansCheckpoint: the checkpoint's files are searched for
// the host's values. A clean python-ds snapshot passes the scan (no key
// pattern in the saved memory of a warmed data-science Python); one
// whose warm runtime holds a value the host also holds (here a line of
// json's docstring, which only the runtime's memory has, not its
// environment) is refused naming the checkpoint file and offset.
func TestSnapshotScansCheckpoint(t *testing.T) {
	img := testenv.Image(t, "python-ds")
	inMemory := []byte("JSON (JavaScript Object Notation) <https://json.org> is a subset of")
	kept := filepath.Join(t.TempDir(), "snapshots")
	t.Run("clean", func(t *testing.T) {
		p, reg, snaps, logs := startWarmIn(t, kept, img, &secretscan.Known{})
		defer closeProvisioner(p)
		testreq.Eventually(t, 3*time.Minute, "the snapshot built", func() bool {
			return snapshotBuilds(t, reg, "built") == 1 || snapshotBuilds(t, reg, "failed") > 0 || snapshotBuilds(t, reg, "refused") > 0
		})
		if snapshotBuilds(t, reg, "built") != 1 {
			t.Fatalf("the clean snapshot was not built:\n%s", logs)
		}
		if got := snapshotDirs(t, snaps); len(got) != 1 {
			t.Errorf("snapshots %v", got)
		}
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "scanned base snapshot") || strings.Contains(line, "built base snapshot") {
				t.Log(line)
			}
		}
	})
	// The snapshot kept by the clean run is scanned again at the next
	// start, with the host's values of then.
	t.Run("kept snapshot rescanned", func(t *testing.T) {
		if got := snapshotDirs(t, kept); len(got) != 1 {
			t.Fatalf("no snapshot kept by the clean run: %v", got)
		}
		known := &secretscan.Known{}
		known.Add("a value only the warm runtime's memory holds", inMemory)
		_, reg, _, logs := startWarmIn(t, kept, img, known)
		testreq.Eventually(t, 3*time.Minute, "the snapshot refused", func() bool {
			return snapshotBuilds(t, reg, "refused") == 1 || snapshotBuilds(t, reg, "built") > 0
		})
		if out := logs.String(); !strings.Contains(out, "base snapshot on disk not used") || !strings.Contains(out, "host-secret") {
			t.Errorf("the kept snapshot was not refused:\n%s", out)
		}
		if got := snapshotDirs(t, kept); len(got) > 0 {
			t.Errorf("snapshots kept: %v", got)
		}
	})
	t.Run("host value in memory", func(t *testing.T) {
		known := &secretscan.Known{}
		known.Add("a value only the warm runtime's memory holds", inMemory)
		_, reg, snaps, logs := startWarm(t, img, known)
		testreq.Eventually(t, 3*time.Minute, "the snapshot refused", func() bool {
			return snapshotBuilds(t, reg, "refused") == 1 || snapshotBuilds(t, reg, "built") > 0
		})
		if snapshotBuilds(t, reg, "refused") != 1 {
			t.Fatalf("not refused:\n%s", logs)
		}
		testreq.Eventually(t, time.Minute, "the refusal logged", func() bool { return strings.Contains(logs.String(), "base snapshot refused") })
		if got := snapshotDirs(t, snaps); len(got) > 0 {
			t.Errorf("snapshots kept: %v", got)
		}
		if out := logs.String(); !strings.Contains(out, "(checkpoint) holds a credential") || !strings.Contains(out, "host-secret") {
			t.Errorf("the refusal does not name the checkpoint:\n%s", out)
		}
	})
}
