package template_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testregistry"
	"github.com/airlockhq/airlock/service/template"
)

// BenchmarkImport times the import as a template of a ~500 MB image
// from a registry on loopback (Debian's docker-registry, started by the
// benchmark): 4 layers holding 8 x 64 MiB of random, incompressible
// data, built and pushed by the benchmark before the timer starts. cold
// empties the layer cache before each import (every layer is fetched);
// cached imports the same layers again with all of them in the cache.
// Each import is waited for until the template is ready (agent,
// hardening and the secret scan of the whole tree included), then the
// template is deleted with the timer stopped. Besides the mean (ns/op)
// it reports the median of its imports (median-s). Only with
// AIRLOCK_BENCH_TEMPLATES=1 (see BENCHMARKS.md):
//
//	AIRLOCK_BENCH_TEMPLATES=1 go test -run '^$' -bench Import -benchtime 3x -timeout 30m ./service/template
func BenchmarkImport(b *testing.B) {
	if os.Getenv("AIRLOCK_BENCH_TEMPLATES") != "1" {
		b.Skip("set AIRLOCK_BENCH_TEMPLATES=1 to measure template imports")
	}
	reg := testregistry.Start(b, testregistry.Options{})
	var es []testregistry.Entry
	for i := 0; i < 8; i++ {
		body := make([]byte, 64<<20)
		rand.Read(body)
		es = append(es, testregistry.Entry{Name: fmt.Sprintf("data/blob%d", i), Body: body})
	}
	img := testregistry.Image(b, nil,
		testregistry.Layer(b, es[0], es[1]), testregistry.Layer(b, es[2], es[3]),
		testregistry.Layer(b, es[4], es[5]), testregistry.Layer(b, es[6], es[7]))
	t0 := time.Now()
	testregistry.Push(b, reg+"/bench/big:1", img, "", "")
	b.Logf("push of 512 MiB (4 layers): %.1fs", time.Since(t0).Seconds())
	f := newFixture(b, template.OCIConfig{InsecureRegistries: []string{reg}}, -1)
	ctx := context.Background()
	n := 0
	run := func(b *testing.B, cold bool) {
		var samples []time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			if cold {
				emptyLayerCache(b, f.state)
			}
			n++
			name := fmt.Sprintf("bench-%d", n)
			b.StartTimer()
			t0 := time.Now()
			if _, err := f.svc.CreateTemplate(ctx, nil, airlock.CreateTemplateRequest{Name: name, FromImage: reg + "/bench/big:1"}); err != nil {
				b.Fatal(err)
			}
			tp := f.wait(b, nil, name)
			d := time.Since(t0)
			b.StopTimer()
			if tp.Status != airlock.TemplateReady {
				b.Fatalf("%s: %s", name, tp.Reason)
			}
			samples = append(samples, d)
			if err := f.svc.DeleteTemplate(ctx, nil, name); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		slices.Sort(samples)
		b.ReportMetric(samples[len(samples)/2].Seconds(), "median-s")
		b.Logf("%d imports: %v", len(samples), samples)
	}
	b.Run("cold", func(b *testing.B) { run(b, true) })
	b.Run("cached", func(b *testing.B) { run(b, false) })
}

// emptyLayerCache removes every cached layer of the state directory.
func emptyLayerCache(b *testing.B, state string) {
	b.Helper()
	dir := template.LayerCacheDir(state)
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			b.Fatal(err)
		}
	}
}
