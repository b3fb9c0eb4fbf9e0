package dockerfile_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testnet"
	"github.com/airlockhq/airlock/service/egress"
	"github.com/airlockhq/airlock/service/template/dockerfile"
	"github.com/airlockhq/airlock/store/sqlite"
)

// buildEgress is an egress service in front of a test internet (the
// only addresses it permits are the internet's), with a store for its
// audit log and a tenant the builds run for.
type buildEgress struct {
	svc    *egress.Service
	store  *sqlite.DB
	tenant *airlock.Tenant
}

func newBuildEgress(t *testing.T, inet *testnet.Internet) *buildEgress {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	tenant := &airlock.Tenant{Name: "builder"}
	if err := store.CreateTenant(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	var r [2]byte
	rand.Read(r[:])
	svc, err := egress.New(egress.Config{
		Store:  store,
		Prefix: "b" + hex.EncodeToString(r[:]),
		// Apart from the egress package's tests (10.200-10.239).
		Subnet:      netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244 + r[0]%8, r[1] &^ 3, 0}), 22),
		Upstreams:   []string{inet.Upstream()},
		Permit:      []netip.Prefix{inet.Prefix},
		PeekTimeout: time.Second,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	svc.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			t.Errorf("close egress: %v", err)
		}
		if err := svc.CheckClean(); err != nil {
			t.Error(err)
		}
	})
	return &buildEgress{svc: svc, store: store, tenant: tenant}
}

// fetchStep is a RUN that saves what http://host/payload answers in
// /fetched (python3 is in the base image; curl and wget are not).
func fetchStep(host string) string {
	return fmt.Sprintf(`RUN python3 -c "import urllib.request; open('/fetched', 'w').write(urllib.request.urlopen('http://%s/payload', timeout=10).read().decode())"`, host)
}

// TestRunStepNetwork: a RUN of a build with an allow list fetches from a
// server of a test internet that the list names, through the egress
// proxy, and the connection is in the egress log under the build's
// execution ID; a RUN that fetches from a name the list leaves out fails
// the build at its line; the same RUN in a build without a network
// fails too (not served from the cache of the build with one), and a
// changed allow list runs the step again while the same one is cached.
func TestRunStepNetwork(t *testing.T) {
	testenv.RequireRoot(t)
	inet := testnet.New(t)
	eg := newBuildEgress(t, inet)
	payload := "payload-" + testenv.RandomID()
	serve := func(body string) netip.Addr {
		return inet.ServeHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/payload" {
				http.NotFound(w, r)
				return
			}
			w.Write([]byte(body))
		}))
	}
	inet.SetName("pkgs.build.test", serve(payload))
	inet.SetName("other.build.test", serve("not-allowed"))
	b := newBuilderWith(t, func(c *dockerfile.Config) { c.Egress = eg.svc })
	ctx := context.Background()
	network := func(allow ...string) *airlock.NetworkRequest {
		return &airlock.NetworkRequest{TenantID: eg.tenant.ID, ExecutionID: "build-nettest",
			Policy: airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: allow}}
	}
	fetchPkgs := "FROM base\n" + fetchStep("pkgs.build.test") + "\n"

	// Allowed: the step fetches through the proxy.
	var log syncBuffer
	res, err := b.Build(ctx, dockerfile.Request{Dockerfile: []byte(fetchPkgs), Network: network("pkgs.build.test"), Log: &log})
	if err != nil {
		t.Fatalf("build with pkgs.build.test allowed: %v\n%s", err, log.String())
	}
	if got := read(t, res.Rootfs, "fetched"); got != payload {
		t.Errorf("/fetched = %q, want %q", got, payload)
	}
	if !strings.Contains(log.String(), "network: through the egress proxy, allowed: pkgs.build.test") {
		t.Errorf("the log does not say the step had a network:\n%s", log.String())
	}
	eg.svc.Flush(ctx)
	evs, err := eg.store.ListEgress(ctx, airlock.EgressFilter{TenantID: eg.tenant.ID, ExecutionID: "build-nettest", Kind: airlock.EgressConnection, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	allowed := false
	for _, ev := range evs {
		allowed = allowed || ev.Name == "pkgs.build.test" && ev.Verdict == airlock.VerdictAllowed
	}
	if !allowed {
		t.Errorf("no allowed connection to pkgs.build.test in the build's egress log: %+v", evs)
	}

	// The same allow list again: cached. Another one: run again.
	log = syncBuffer{}
	again, err := b.Build(ctx, dockerfile.Request{Dockerfile: []byte(fetchPkgs), Network: network("PKGS.build.test"), Log: &log})
	if err != nil || !again.Steps[1].Cached {
		t.Errorf("rebuild with the same allow list: %v, cached %v\n%s", err, err == nil && again.Steps[1].Cached, log.String())
	}
	log = syncBuffer{}
	wider, err := b.Build(ctx, dockerfile.Request{Dockerfile: []byte(fetchPkgs), Network: network("pkgs.build.test", "mirror.build.test"), Log: &log})
	if err != nil {
		t.Fatalf("build with a wider allow list: %v\n%s", err, log.String())
	}
	if wider.Steps[1].Cached || wider.Key == res.Key {
		t.Errorf("a changed allow list was served from the cache (key %s)", wider.Key)
	}

	// Not on the list: the build fails at the RUN's line.
	log = syncBuffer{}
	_, err = b.Build(ctx, dockerfile.Request{
		Dockerfile: []byte("FROM base\nENV A=1\n" + fetchStep("other.build.test") + "\n"),
		Network:    network("pkgs.build.test"), Log: &log,
	})
	var se *dockerfile.StepError
	if !errors.As(err, &se) || se.Line != 3 || se.ExitCode <= 0 {
		t.Fatalf("fetch of a name not on the list: %v, want a failed step at line 3\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "line 3") || strings.Contains(log.String(), "not-allowed") {
		t.Errorf("log:\n%s", log.String())
	}

	// No network on the build: the step that worked with one fails.
	log = syncBuffer{}
	_, err = b.Build(ctx, dockerfile.Request{Dockerfile: []byte(fetchPkgs), Log: &log})
	if !errors.As(err, &se) || se.Line != 2 || se.ExitCode <= 0 {
		t.Fatalf("fetch without a network: %v, want a failed step at line 2\n%s", err, log.String())
	}
	if strings.Contains(log.String(), "CACHED") {
		t.Errorf("the build without a network was served the cache of the build with one:\n%s", log.String())
	}
}

// TestRunStepNetworkRefused: a builder without an egress service refuses
// a build that asks for a network, and a bad allow list is refused
// before anything runs.
func TestRunStepNetworkRefused(t *testing.T) {
	b := newBuilder(t)
	ctx := context.Background()
	_, err := b.Build(ctx, dockerfile.Request{Dockerfile: []byte("FROM base\nRUN true\n"),
		Network: &airlock.NetworkRequest{TenantID: "t", ExecutionID: "x", Policy: airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"a.test"}}}})
	if !errors.Is(err, dockerfile.ErrNoEgress) {
		t.Errorf("network without egress: %v, want ErrNoEgress", err)
	}
	for _, req := range []airlock.CreateTemplateRequest{
		{Name: "n", Dockerfile: "FROM base\n", Network: &airlock.TemplateNetwork{}},
		{Name: "n", Dockerfile: "FROM base\n", Network: &airlock.TemplateNetwork{Allow: []string{"10.0.0.1:80"}}},
		{Name: "n", Dockerfile: "FROM base\n", Network: &airlock.TemplateNetwork{Allow: []string{"*.com"}}},
		{Name: "n", FromImage: "127.0.0.1:5000/x:1", Network: &airlock.TemplateNetwork{Allow: []string{"a.test"}}},
	} {
		if err := req.Validate(); airlock.ErrorCode(err) != airlock.EINVALID {
			t.Errorf("request %+v: %v, want EINVALID", req.Network, err)
		}
	}
	ok := airlock.CreateTemplateRequest{Name: "n", Dockerfile: "FROM base\n", Network: &airlock.TemplateNetwork{Allow: []string{"pkgs.example.com", "*.example.org:8443"}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid request: %v", err)
	}
	if err := b.Validate(&ok); airlock.ErrorCode(err) != airlock.EFORBIDDEN {
		t.Errorf("builder without egress validates a network: %v, want EFORBIDDEN", err)
	}
}
