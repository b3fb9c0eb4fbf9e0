package template_test

import (
	"context"
	"crypto/rand"
	"os"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testregistry"
	"github.com/airlockhq/airlock/service/template"
)

// TestImportTiming measures the import of a ~500 MB image of random
// (incompressible) data from a registry on loopback, cold and then with
// every layer cached. Only with AIRLOCK_BENCH_TEMPLATES=1 (BENCHMARKS.md).
func TestImportTiming(t *testing.T) {
	if os.Getenv("AIRLOCK_BENCH_TEMPLATES") != "1" {
		t.Skip("set AIRLOCK_BENCH_TEMPLATES=1 to measure template imports")
	}
	reg := testregistry.Start(t, testregistry.Options{})
	var es []testregistry.Entry
	for i := 0; i < 8; i++ {
		b := make([]byte, 64<<20)
		rand.Read(b)
		es = append(es, testregistry.Entry{Name: "data/blob" + string(rune('0'+i)), Body: b})
	}
	img := testregistry.Image(t, nil,
		testregistry.Layer(t, es[0], es[1]), testregistry.Layer(t, es[2], es[3]),
		testregistry.Layer(t, es[4], es[5]), testregistry.Layer(t, es[6], es[7]))
	t0 := time.Now()
	testregistry.Push(t, reg+"/bench/big:1", img, "", "")
	t.Logf("push of 512 MiB (4 layers): %.1fs", time.Since(t0).Seconds())
	f := newFixture(t, template.OCIConfig{InsecureRegistries: []string{reg}}, -1)
	ctx := context.Background()
	for _, name := range []string{"cold", "cached"} {
		t0 := time.Now()
		if _, err := f.svc.CreateTemplate(ctx, nil, airlock.CreateTemplateRequest{Name: name, FromImage: reg + "/bench/big:1"}); err != nil {
			t.Fatal(err)
		}
		tp := f.wait(t, nil, name)
		if tp.Status != airlock.TemplateReady {
			t.Fatalf("%s: %s", name, tp.Reason)
		}
		t.Logf("import %s: %.2fs (%d bytes)", name, time.Since(t0).Seconds(), tp.SizeBytes)
	}
}
