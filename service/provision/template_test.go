package provision_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/provision"
)

// templateImage is a template's image as the template service resolves
// it: base's rootfs under a template's name and hash, with a start_cmd
// (and ready_cmd) when start is set.
func templateImage(t *testing.T, base *airlock.Image, id string, start bool) *airlock.Image {
	t.Helper()
	h := sha256.Sum256([]byte("template-test\x00" + id))
	img := &airlock.Image{Name: airlock.TemplateImagePrefix + id, Hash: hex.EncodeToString(h[:]), Rootfs: base.Rootfs, Env: base.Env}
	if start {
		img.StartCmd = "echo started > /dev/shm/started; exec sleep 100000"
		img.ReadyCmd = "test -f /dev/shm/started"
	}
	return img
}

// acquireOn acquires a session's sandbox of img for tenant and returns
// where it came from; the sandbox is destroyed at once.
func acquireOn(t *testing.T, p *provision.Provisioner, tenant *airlock.Tenant, img *airlock.Image) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	limits := airlock.DefaultLimits
	tk, err := p.Admit(ctx, provision.Claim{Kind: provision.Session, Tenant: tenant, Limits: limits})
	if err != nil {
		t.Fatalf("admit: %v", err)
	}
	l, err := tk.Acquire(ctx, provision.Spec{ID: "ts-" + airlock.NewID()[:16], Image: img, Limits: limits})
	if err != nil {
		t.Fatalf("acquire %s: %v", img.Name, err)
	}
	defer l.Destroy(context.Background())
	if img.StartCmd != "" {
		// The template's start_cmd ran in it, whatever its source (a
		// restored sandbox has a fresh /workspace and /tmp; /dev/shm is
		// in its memory, restored with it).
		var out strings.Builder
		pr, err := l.Sandbox().Agent().Exec(ctx, airlock.ExecRequest{Argv: []string{"cat", "/dev/shm/started"}}, &out, nil)
		if err == nil {
			_, err = pr.Wait(ctx)
		}
		if err != nil || strings.TrimSpace(out.String()) != "started" {
			t.Fatalf("%s sandbox (%s): start_cmd's file = %q, %v", img.Name, l.StartSource(), out.String(), err)
		}
	}
	return l.StartSource()
}

// TestTemplatePoolFollowsItsArrivals: a template holds no pool member
// until it is asked for, holds members while it is used, serves only its
// own key (another tenant's private template of the same content gets
// none of them), and holds none again once idle; the node's Min does not
// apply to it.
func TestTemplatePoolFollowsItsArrivals(t *testing.T) {
	st := teststack.New(t, teststack.Options{NoServer: true,
		Pool: provision.PoolConfig{Min: 2, Max: 8, TemplateMax: 2, TemplateIdle: 20 * time.Second}})
	base, err := st.Images.Resolve(context.Background(), "base")
	if err != nil {
		t.Fatal(err)
	}
	a := st.NewTenant(t, "a"+airlock.NewID()[:8]).Tenant
	b := st.NewTenant(t, "b"+airlock.NewID()[:8]).Tenant
	ta := templateImage(t, base, "tpa"+airlock.NewID()[:12], false)
	tb := templateImage(t, base, "tpb"+airlock.NewID()[:12], false)
	p := st.Provisioner

	if n, _ := p.ImagePool(ta.Name); n != 0 {
		t.Fatalf("a template never asked for holds %d members", n)
	}
	if got := acquireOn(t, p, a, ta); got == airlock.StartPool {
		t.Fatalf("first start of a new template came from the pool")
	}
	testreq.Eventually(t, 2*time.Minute, "a pool member of the used template", func() bool {
		n, _ := p.ImagePool(ta.Name)
		return n >= 1
	})
	if n, _ := p.ImagePool(tb.Name); n != 0 {
		t.Fatalf("the other tenant's template got %d members from a's use", n)
	}
	// b's template, made of the same rootfs, is not served a's member.
	if got := acquireOn(t, p, b, tb); got == airlock.StartPool {
		t.Fatalf("another tenant's template was served from the pool of a's")
	}
	if got := acquireOn(t, p, a, ta); got != airlock.StartPool {
		t.Fatalf("second start of a used template came from %s, want the pool", got)
	}
	// Its cap holds whatever the node's Min and Max say.
	for i := 0; i < 3; i++ {
		if n, _ := p.ImagePool(ta.Name); n > 2 {
			t.Fatalf("template holds %d members, over --template-pool-max 2", n)
		}
		time.Sleep(300 * time.Millisecond) // sample the pool a few times; not a synchronisation
	}
	// Unused: no member, no memory.
	testreq.Eventually(t, time.Minute, "the idle templates' members destroyed", func() bool {
		na, ma := p.ImagePool(ta.Name)
		nb, _ := p.ImagePool(tb.Name)
		return na == 0 && nb == 0 && ma == 0
	})
}

// TestTemplateBaseSnapshot: a template with a start_cmd gets a base
// snapshot at its first use, and a later miss restores it with the
// start_cmd's program running; deleting the template (Forget) removes
// its snapshot and members, and none is made again.
func TestTemplateBaseSnapshot(t *testing.T) {
	snapDir := filepath.Join(t.TempDir(), "snapshots")
	st := teststack.New(t, teststack.Options{NoServer: true, SnapshotDir: snapDir, Pool: provision.PoolConfig{Disabled: true}})
	base, err := st.Images.Resolve(context.Background(), "base")
	if err != nil {
		t.Fatal(err)
	}
	a := st.NewTenant(t, "a"+airlock.NewID()[:8]).Tenant
	tpl := templateImage(t, base, "tps"+airlock.NewID()[:12], true)
	p := st.Provisioner
	if got := acquireOn(t, p, a, tpl); got != airlock.StartCold {
		t.Fatalf("first start of a new template came from %s, want cold", got)
	}
	snaps := func() []string {
		ents, _ := os.ReadDir(snapDir)
		var out []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), tpl.Name+"-") {
				out = append(out, e.Name())
			}
		}
		return out
	}
	testreq.Eventually(t, 3*time.Minute, "a start restored from the template's base snapshot", func() bool {
		return acquireOn(t, p, a, tpl) == airlock.StartRestore
	})
	if len(snaps()) != 1 {
		t.Fatalf("snapshots of the template: %v, want one", snaps())
	}
	p.Forget(tpl.Name)
	if s := snaps(); len(s) != 0 {
		t.Fatalf("snapshots left after Forget: %v", s)
	}
	if got := acquireOn(t, p, a, tpl); got != airlock.StartCold {
		t.Fatalf("a start after Forget came from %s, want cold", got)
	}
	if s := snaps(); len(s) != 0 {
		t.Fatalf("a snapshot was made again after Forget: %v", s)
	}
}

// TestTemplateBaseSnapshotKeepsDisk: what a template's start_cmd wrote
// to /tmp and /workspace before its base snapshot was taken (a file it
// holds open among it) is there in a sandbox restored from the
// snapshot, as in a cold one; the restore does not fail over it.
func TestTemplateBaseSnapshotKeepsDisk(t *testing.T) {
	snapDir := filepath.Join(t.TempDir(), "snapshots")
	st := teststack.New(t, teststack.Options{NoServer: true, SnapshotDir: snapDir, Pool: provision.PoolConfig{Disabled: true}})
	base, err := st.Images.Resolve(context.Background(), "base")
	if err != nil {
		t.Fatal(err)
	}
	a := st.NewTenant(t, "a"+airlock.NewID()[:8]).Tenant
	tpl := templateImage(t, base, "tpd"+airlock.NewID()[:12], false)
	tpl.StartCmd = "mkdir -p /tmp/run && echo started > /tmp/run/started && echo ws > /workspace/ws.txt && exec sleep 100000 < /tmp/run/started"
	tpl.ReadyCmd = "test -s /tmp/run/started"
	p := st.Provisioner
	// acquire takes a sandbox of tpl, checks its files and returns
	// where it came from.
	acquire := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		limits := airlock.DefaultLimits
		tk, err := p.Admit(ctx, provision.Claim{Kind: provision.Session, Tenant: a, Limits: limits})
		if err != nil {
			t.Fatalf("admit: %v", err)
		}
		l, err := tk.Acquire(ctx, provision.Spec{ID: "ts-" + airlock.NewID()[:16], Image: tpl, Limits: limits})
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		defer l.Destroy(context.Background())
		var out strings.Builder
		pr, err := l.Sandbox().Agent().Exec(ctx, airlock.ExecRequest{Argv: []string{"cat", "/tmp/run/started", "/workspace/ws.txt"}}, &out, nil)
		if err == nil {
			_, err = pr.Wait(ctx)
		}
		if err != nil || out.String() != "started\nws\n" {
			t.Fatalf("%s sandbox: start_cmd's files = %q, %v", l.StartSource(), out.String(), err)
		}
		return l.StartSource()
	}
	if got := acquire(); got != airlock.StartCold {
		t.Fatalf("first start came from %s, want cold", got)
	}
	testreq.Eventually(t, 3*time.Minute, "a start restored from the template's base snapshot", func() bool {
		return acquire() == airlock.StartRestore
	})
}
