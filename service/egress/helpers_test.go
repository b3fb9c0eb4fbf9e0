package egress_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/netns"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/testnet"
	"github.com/airlockhq/airlock/service/egress"
	"github.com/airlockhq/airlock/store/sqlite"
)

// fixture is an egress service in front of a test internet, with a store
// for its audit log.
type fixture struct {
	t      testing.TB
	inet   *testnet.Internet
	cfg    egress.Config
	svc    *egress.Service
	store  *sqlite.DB
	tenant *airlock.Tenant
}

type fixtureOpts struct {
	quota   int64
	tenants egress.TenantMeter
	broker  func(rec func(*airlock.EgressEvent), inet *testnet.Internet, store *sqlite.DB) airlock.Broker
	deny    func(inet *testnet.Internet) []netip.Prefix // Config.Deny
}

func newFixture(t testing.TB, o fixtureOpts) *fixture {
	t.Helper()
	if os.Geteuid() != 0 {
		testreq.Skip(t, "skipped: needs root (network namespaces and nftables)")
	}
	inet := testnet.New(t)
	store, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	tenant := &airlock.Tenant{Name: "acme"}
	if err := store.CreateTenant(context.Background(), tenant); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, inet: inet, store: store, tenant: tenant}
	var r [2]byte
	rand.Read(r[:])
	cfg := egress.Config{
		Store:       store,
		Prefix:      "e" + hex.EncodeToString(r[:]),
		Subnet:      netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200 + r[0]%40, r[1] &^ 3, 0}), 22),
		Upstreams:   []string{inet.Upstream()},
		Permit:      []netip.Prefix{inet.Prefix},
		QuotaBytes:  o.quota,
		Tenants:     o.tenants,
		PeekTimeout: time.Second,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if o.deny != nil {
		cfg.Deny = o.deny(inet)
	}
	if o.broker != nil {
		// The broker records through the service, which exists only
		// after New: hand it a recorder that forwards.
		cfg.Broker = o.broker(func(ev *airlock.EgressEvent) { f.svc.Record(ev) }, inet, store)
	}
	f.cfg = cfg
	svc, err := egress.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc
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
	return f
}

// attach makes a sandbox network; the "sandbox" of these tests is the
// kernel's own network stack in that namespace.
func (f *fixture) attach(allow []string, scopes ...string) *sandbox {
	f.t.Helper()
	id := "s" + testID()
	att, err := f.svc.Attach(context.Background(), airlock.NetworkRequest{
		TenantID:     f.tenant.ID,
		SessionID:    id,
		Policy:       airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: allow},
		BrokerScopes: scopes,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { att.Close(context.Background()) })
	return &sandbox{f: f, att: att, id: id}
}

func testID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type sandbox struct {
	f   *fixture
	att airlock.NetworkAttachment
	id  string // the session it stands for
}

func (s *sandbox) ns() string { return s.att.Sandbox().NetNSPath }

// gateway is the sandbox's resolver (the host end of its link), read from
// its resolv.conf.
func (s *sandbox) gateway() string {
	var gw string
	for _, line := range splitLines(s.att.Sandbox().ResolvConf) {
		if len(line) > 11 && line[:11] == "nameserver " {
			gw = line[11:]
		}
	}
	return gw
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// do runs f inside the sandbox's namespace.
func (s *sandbox) do(f func() error) error { return netns.Do(s.ns(), f) }

// query asks the sandbox's resolver (never the host's) from inside the
// sandbox. Go's own resolver looks names up on other goroutines, which
// are not in the namespace, so the tests use a DNS client of their own.
func (s *sandbox) query(name string, qtype uint16) (*dns.Msg, error) {
	var in *dns.Msg
	err := s.do(func() error {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), qtype)
		c := &dns.Client{Timeout: 5 * time.Second}
		var err error
		in, _, err = c.Exchange(m, net.JoinHostPort(s.gateway(), "53"))
		return err
	})
	return in, err
}

// errNotFound is a lookup's answer for a name that does not exist.
var errNotFound = errors.New("NXDOMAIN")

// lookup resolves a name through the sandbox's resolver.
func (s *sandbox) lookup(name string) ([]string, error) {
	in, err := s.query(name, dns.TypeA)
	if err != nil {
		return nil, err
	}
	if in.Rcode == dns.RcodeNameError {
		return nil, errNotFound
	}
	if in.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("rcode %s", dns.RcodeToString[in.Rcode])
	}
	var out []string
	for _, rr := range in.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no address")
	}
	return out, nil
}

// dial connects from inside the sandbox, resolving a name through its
// resolver.
func (s *sandbox) dial(addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if _, err := netip.ParseAddr(host); err != nil {
		addrs, err := s.lookup(host)
		if err != nil {
			return nil, err
		}
		host = addrs[0]
	}
	var c net.Conn
	err = s.do(func() error {
		var err error
		c, err = (&net.Dialer{Timeout: 3 * time.Second}).Dial("tcp4", net.JoinHostPort(host, port))
		return err
	})
	return c, err
}

// client is an HTTP client whose connections are made inside the sandbox
// and which trusts the test internet's CA.
func (s *sandbox) client() *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{RootCAs: s.f.inet.CertPool()},
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return s.dial(addr)
			},
		},
	}
}

func (s *sandbox) get(url string) (int, string, error) {
	resp, err := s.client().Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// events returns the sandbox's audit log, oldest first.
func (s *sandbox) events(kind string) []*airlock.EgressEvent {
	s.f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.f.svc.Flush(ctx)
	all, err := s.f.store.ListEgress(ctx, airlock.EgressFilter{TenantID: s.f.tenant.ID, SessionID: s.id, Kind: kind, Limit: 500})
	if err != nil {
		s.f.t.Fatal(err)
	}
	for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
		all[i], all[j] = all[j], all[i]
	}
	return all
}
