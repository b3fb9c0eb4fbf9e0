package e2b_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testnet"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/egress"
	"github.com/airlockhq/airlock/store/sqlite"
)

// newNetNode is a node with the egress service in front of a test
// internet of two web servers, api.test and other.test; tenant a's
// default allow list is api.test, tenant b has none.
func newNetNode(t *testing.T) *node {
	t.Helper()
	inet := testnet.New(t)
	for _, name := range []string{"api.test", "other.test"} {
		inet.SetName(name, inet.ServeHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello from %s", r.Host)
		})))
	}
	store, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	var r [2]byte
	rand.Read(r[:])
	svc, err := egress.New(egress.Config{
		Store:       store,
		Prefix:      "b" + hex.EncodeToString(r[:]),
		Subnet:      netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 160 + r[0]%40, r[1] &^ 3, 0}), 22),
		Upstreams:   []string{inet.Upstream()},
		Permit:      []netip.Prefix{inet.Prefix},
		PeekTimeout: time.Second,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	svc.Start()
	// Registered before the stack's: runs after its sandboxes are gone.
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
	lists := map[string][]string{"a": {"api.test"}}
	return newNodeWith(t, teststack.Options{
		NoServer: true, Store: store, Egress: svc, EgressLog: store,
		NetworkAllow: func(tn *airlock.Tenant) []string { return lists[tn.Name] },
	})
}

// reaches reports which of api.test and other.test the sandbox reaches.
func (n *node) reaches(t *testing.T, s sandbox) []string {
	t.Helper()
	_, msgs, end := n.connectStream(t, "/process.Process/Start", s.envd(), bash(`python3 - <<'EOF'
import urllib.request
for h in ("api.test", "other.test"):
    try:
        print(h, urllib.request.urlopen("http://" + h + "/", timeout=5).read().decode())
    except Exception as e:
        print(h, "failed", type(e).__name__)
EOF`))
	if string(end) != "{}" {
		t.Fatalf("fetch: %s", end)
	}
	var out strings.Builder
	for _, m := range msgs {
		var ev procEvent
		if err := json.Unmarshal(m, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Event.Data != nil {
			out.Write(ev.Event.Data.Stdout)
		}
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		host, rest, _ := strings.Cut(l, " ")
		switch {
		case rest == "hello from "+host:
			got = append(got, host)
		case !strings.HasPrefix(rest, "failed "):
			t.Fatalf("fetch: %q", out.String())
		}
	}
	return got
}

// TestNetwork checks the network of E2B sandboxes on the tenant's
// policy: allow_internet_access takes the tenant's default allow list,
// PUT /sandboxes/{id}/network replaces the session's list (and what the
// sandbox reaches), a sandbox without a network answers a PUT that
// names hosts with a 409 and one that names none with a 204.
func TestNetwork(t *testing.T) {
	n := newNetNode(t)
	ctx := context.Background()
	key := map[string]string{"X-API-KEY": n.keyA}
	allowOf := func(tn *airlock.Tenant, s sandbox) (string, []string) {
		t.Helper()
		sess, err := n.st.Sessions.Session(ctx, tn, s.SandboxID)
		if err != nil {
			t.Fatal(err)
		}
		return sess.Network.Mode, sess.Network.Allow
	}

	// Created with the defaults: the tenant's default list.
	s := n.create(t, n.keyA, `{"templateID":"base"}`)
	if mode, allow := allowOf(n.a, s); mode != airlock.NetworkAllowList || !slices.Equal(allow, []string{"api.test"}) {
		t.Fatalf("default network: %s %v", mode, allow)
	}
	if d := n.info(t, n.keyA, s.SandboxID); !d.AllowInternetAccess || d.Network == nil || !slices.Equal(d.Network.AllowOut, []string{"api.test"}) {
		t.Errorf("info: %+v", d)
	}
	if got := n.reaches(t, s); !slices.Equal(got, []string{"api.test"}) {
		t.Errorf("with the default list the sandbox reaches %v", got)
	}

	for _, c := range []struct {
		name, body string
		status     int
		allow      []string // the list after the call
		reaches    []string // nil: not fetched
	}{
		{"only other.test", `{"allowOut":["other.test"],"denyOut":["0.0.0.0/0"]}`, 204, []string{"other.test"}, []string{"other.test"}},
		{"an address", `{"allowOut":["10.0.0.0/8"]}`, 400, []string{"other.test"}, nil},
		{"not JSON", `{"allowOut":`, 400, []string{"other.test"}, nil},
		{"both", `{"allowOut":["other.test"]}`, 204, []string{"api.test", "other.test"}, []string{"api.test", "other.test"}},
		{"nothing", `{"allow_internet_access":false}`, 204, []string{}, []string{}},
		{"the default list again", `{"allowOut":["0.0.0.0/0"],"allow_internet_access":false}`, 204, []string{"api.test"}, []string{"api.test"}},
		{"deny a name of the default list", `{"denyOut":["api.test"]}`, 204, []string{}, nil},
		{"an empty body: the default list", ``, 204, []string{"api.test"}, nil},
	} {
		r := n.do(t, "PUT", "/sandboxes/"+s.SandboxID+"/network", key, strings.NewReader(c.body))
		if r.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.status, r.body, c.status)
		}
		if mode, allow := allowOf(n.a, s); mode != airlock.NetworkAllowList || !slices.Equal(allow, c.allow) && len(allow)+len(c.allow) > 0 {
			t.Errorf("%s: the session's list is %s %v, want %v", c.name, mode, allow, c.allow)
		}
		if c.reaches != nil {
			if got := n.reaches(t, s); !slices.Equal(got, c.reaches) && len(got)+len(c.reaches) > 0 {
				t.Errorf("%s: the sandbox reaches %v, want %v", c.name, got, c.reaches)
			}
		}
	}
	if r := n.do(t, "PUT", "/sandboxes/"+s.SandboxID+"/network", map[string]string{"X-API-KEY": n.keyB}, strings.NewReader(`{}`)); r.status != 404 {
		t.Errorf("another tenant's PUT: %d %s", r.status, r.body)
	}

	// How each create maps, for a tenant with a default list (a) and
	// one without (b).
	for _, c := range []struct {
		name   string
		tenant *airlock.Tenant
		key    string
		body   string
		mode   string
		allow  []string
	}{
		{"a, allow_internet_access true", n.a, n.keyA, `{"allow_internet_access":true}`, airlock.NetworkAllowList, []string{"api.test"}},
		{"a, allow_internet_access false", n.a, n.keyA, `{"allow_internet_access":false}`, airlock.NetworkNone, nil},
		{"a, false with allowOut", n.a, n.keyA, `{"allow_internet_access":false,"network":{"allowOut":["other.test"]}}`, airlock.NetworkAllowList, []string{"other.test"}},
		{"b, allow_internet_access true", n.b, n.keyB, `{"allow_internet_access":true}`, airlock.NetworkNone, nil},
		{"b, a network section", n.b, n.keyB, `{"network":{}}`, airlock.NetworkAllowList, nil},
	} {
		s := n.create(t, c.key, `{"templateID":"base",`+strings.TrimPrefix(c.body, "{"))
		if mode, allow := allowOf(c.tenant, s); mode != c.mode || !slices.Equal(allow, c.allow) && len(allow)+len(c.allow) > 0 {
			t.Errorf("%s: %s %v, want %s %v", c.name, mode, allow, c.mode, c.allow)
		}
		if d := n.info(t, c.key, s.SandboxID); d.AllowInternetAccess != (c.mode == airlock.NetworkAllowList) {
			t.Errorf("%s: info says allowInternetAccess %v", c.name, d.AllowInternetAccess)
		}
		h := map[string]string{"X-API-KEY": c.key}
		if c.mode == airlock.NetworkNone {
			// No network, and a running sandbox cannot get one: a PUT
			// that names a host is a conflict, one that leaves it
			// without any is already done.
			r := n.do(t, "PUT", "/sandboxes/"+s.SandboxID+"/network", h, strings.NewReader(`{"allowOut":["other.test"]}`))
			var e apiErr
			if r.json(t, &e); r.status != 409 || e.Code != 409 || !strings.Contains(e.Message, "network") {
				t.Errorf("%s: PUT a host: %d %s", c.name, r.status, r.body)
			}
			for _, body := range []string{`{"allow_internet_access":false}`, `{"denyOut":["0.0.0.0/0"]}`} {
				if r := n.do(t, "PUT", "/sandboxes/"+s.SandboxID+"/network", h, strings.NewReader(body)); r.status != 204 {
					t.Errorf("%s: PUT %s: %d %s", c.name, body, r.status, r.body)
				}
			}
			if mode, _ := allowOf(c.tenant, s); mode != airlock.NetworkNone {
				t.Errorf("%s: after the PUTs: %s", c.name, mode)
			}
			continue
		}
		r := n.do(t, "PUT", "/sandboxes/"+s.SandboxID+"/network", h, strings.NewReader(`{"allowOut":["other.test"],"allow_internet_access":false}`))
		if mode, allow := allowOf(c.tenant, s); r.status != 204 || mode != airlock.NetworkAllowList || !slices.Equal(allow, []string{"other.test"}) {
			t.Errorf("%s: PUT: %d %s; %s %v", c.name, r.status, r.body, mode, allow)
		}
	}
}
