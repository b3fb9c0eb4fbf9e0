package template_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/testregistry"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/node"
	"github.com/airlockhq/airlock/service/provision"
)

// TestTemplateStartTiming measures, in one run on one node, the session
// create (over the API, to the session ready) of: the first session of a
// new template (no pool member, no snapshot: a cold boot), a pool hit of
// a template that was used, and a pool hit of python-ds. Only with
// AIRLOCK_BENCH_TEMPLATES=1 (BENCHMARKS.md).
func TestTemplateStartTiming(t *testing.T) {
	if os.Getenv("AIRLOCK_BENCH_TEMPLATES") != "1" {
		t.Skip("set AIRLOCK_BENCH_TEMPLATES=1 to measure template starts")
	}
	const rounds = 7
	reg := testregistry.Start(t, testregistry.Options{})
	img := testregistry.Image(t, nil, testregistry.MiniRootfs(t, testenv.Image(t, "base").Rootfs))
	testregistry.Push(t, reg+"/bench/mini:1", img, "", "")
	s := teststack.New(t, teststack.Options{Snapshots: true, WarmSessions: []string{"python-ds/small"},
		Pool:      provision.PoolConfig{Min: 1, Max: 8, TemplateMax: 2, TemplateIdle: 10 * time.Minute},
		Templates: &node.TemplatesConfig{InsecureRegistries: []string{reg}}})
	ctx := context.Background()
	a := s.NewTenant(t, "bench")
	var names []string
	for i := 0; i < rounds; i++ {
		name := fmt.Sprintf("bench%d", i)
		if _, err := a.Client.CreateTemplate(ctx, airlock.CreateTemplateRequest{Name: name, FromImage: reg + "/bench/mini:1"}); err != nil {
			t.Fatal(err)
		}
		if err := a.Client.TemplateLogs(ctx, name, discard{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	start := func(req airlock.CreateSessionRequest) (time.Duration, string) {
		t.Helper()
		t0 := time.Now()
		sess, _, err := a.Client.CreateSession(ctx, req)
		took := time.Since(t0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Client.DeleteSession(ctx, sess.ID); err != nil {
			t.Fatal(err)
		}
		return took, sess.StartSource
	}
	poolOf := func(image string) func() bool {
		return func() bool { n, _ := s.Provisioner.ImagePool(image); return n >= 1 }
	}
	imageOf := func(name string) string {
		tp, err := a.Client.Template(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return airlock.TemplateImagePrefix + tp.ID
	}
	var cold, tplHit, dsHit []time.Duration
	for i := 0; i < rounds; i++ {
		// A new template: nothing ready for it.
		d, src := start(airlock.CreateSessionRequest{Template: names[i]})
		if src == airlock.StartPool {
			t.Fatalf("first session of %s came from the pool", names[i])
		}
		cold = append(cold, d)
		// The template just used: its pool readies a member.
		testreq.Eventually(t, 2*time.Minute, "a pool member of "+names[0], poolOf(imageOf(names[0])))
		d, src = start(airlock.CreateSessionRequest{Template: names[0]})
		if src != airlock.StartPool {
			t.Fatalf("template %s: %s, want pool", names[0], src)
		}
		tplHit = append(tplHit, d)
		testreq.Eventually(t, 2*time.Minute, "a pool member of python-ds", poolOf("python-ds"))
		d, src = start(airlock.CreateSessionRequest{Image: "python-ds", Size: airlock.SizeSmall})
		if src != airlock.StartPool {
			t.Fatalf("python-ds: %s, want pool", src)
		}
		dsHit = append(dsHit, d)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	for _, c := range []struct {
		name string
		d    []time.Duration
	}{{"new template, first session (cold)", cold}, {"template, pool hit", tplHit}, {"python-ds, pool hit", dsHit}} {
		slices.Sort(c.d)
		t.Logf("%-36s median %6.3fs  p99 (max of %d) %6.3fs  all %v", c.name, c.d[len(c.d)/2].Seconds(), len(c.d), c.d[len(c.d)-1].Seconds(), c.d)
	}
	t.Logf("load average at the end: %s", load)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
