package microvm_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/internal/netns"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testnet"
	"github.com/airlockhq/airlock/service/egress"
	"github.com/airlockhq/airlock/store/sqlite"
)

// probeScript fetches each URL of its arguments through the guest's own
// resolver and stack, printing "OK <status> <body>" or "ERR <why>", then
// the guest's interfaces and its resolver.
const probeScript = `
import socket, sys, urllib.request
for url in sys.argv[1:]:
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            print("OK", r.status, r.read().decode().strip())
    except Exception as e:
        print("ERR", type(e).__name__)
print("IFS", " ".join(sorted(n for i, n in socket.if_nameindex())))
print("NS", " ".join(l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")))
`

// A VM with a network reaches an allow-listed name of the test's own
// internet through the node's egress proxy and resolver, and nothing
// else: the tap in the sandbox's namespace puts the guest behind the
// same link, rules and proxy as a gVisor sandbox. The tap is gone with
// the VM.
func TestNetwork(t *testing.T) {
	b := testenv.MicroVM(t)
	img := testenv.Image(t, "base")
	inet := testnet.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tenant := &airlock.Tenant{Name: "acme"}
	if err := store.CreateTenant(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	var r [2]byte
	rand.Read(r[:])
	svc, err := egress.New(egress.Config{
		Store:       store,
		Prefix:      "v" + hex.EncodeToString(r[:]),
		Subnet:      netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 160 + r[0]%40, r[1] &^ 3, 0}), 22),
		Upstreams:   []string{inet.Upstream()},
		Permit:      []netip.Prefix{inet.Prefix},
		PeekTimeout: 5 * time.Second,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	svc.Start()
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		if err := svc.Close(cctx); err != nil {
			t.Errorf("close egress: %v", err)
		}
		if err := svc.CheckClean(); err != nil {
			t.Error(err)
		}
	}()
	var otherHits atomic.Int64
	inet.SetName("api.test", inet.ServeHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s%s", r.Host, r.URL.Path)
	})))
	inet.SetName("other.test", inet.ServeHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		fmt.Fprint(w, "other")
	})))
	att, err := svc.Attach(ctx, airlock.NetworkRequest{
		TenantID: tenant.ID, SessionID: "vm-net",
		Policy: airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"api.test"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close(context.WithoutCancel(ctx))
	sb, err := b.Create(ctx, airlock.SandboxSpec{ID: "net-" + testenv.RandomID(), Image: img, Limits: airlock.DefaultLimits, Network: att.Sandbox()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.WithoutCancel(ctx))

	var out strings.Builder
	p, err := sb.Agent().Exec(ctx, protocol.ExecRequest{Argv: []string{"python3", "-c", probeScript,
		"http://api.test/hello", "http://other.test/", "http://" + inet.Prefix.Addr().Next().String() + "/"}, TimeoutMS: 120000}, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(ctx); err != nil || st.Code != 0 {
		t.Fatalf("probe: %+v %v: %s", st, err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	gw := ""
	for _, l := range strings.Split(att.Sandbox().ResolvConf, "\n") {
		if v, ok := strings.CutPrefix(l, "nameserver "); ok {
			gw = v
		}
	}
	want := []string{"OK 200 hello from api.test/hello", "ERR", "ERR", "IFS eth0 lo", "NS " + gw}
	if len(lines) != len(want) {
		t.Fatalf("probe printed %q, want %q", lines, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want %q", i, lines[i], w)
		}
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("other.test (not allowed) got %d requests", n)
	}
	if n := att.Attempts(ctx); n < 3 {
		t.Errorf("egress counted %d attempts, want at least the three", n)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	err = netns.Do(att.Sandbox().NetNSPath, func() error {
		if _, err := netlink.LinkByName("vmtap0"); err == nil {
			return fmt.Errorf("the tap is still in the sandbox's namespace after Destroy")
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}
