package netns_test

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/airlockhq/airlock/internal/netns"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testreq.Skip(t, "skipped: needs root (network namespaces and nftables)")
	}
}

func prefix() string {
	var b [2]byte
	rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// listenTCP and listenUDP open host listeners on free ports.
func listenTCP(t *testing.T) *net.TCPListener {
	t.Helper()
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func newManager(t *testing.T, proxy, dns uint16) *netns.Manager {
	t.Helper()
	var r [2]byte
	rand.Read(r[:])
	subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200 + r[0]%40, r[1] &^ 3, 0}), 22)
	m, err := netns.New(netns.Config{Prefix: prefix(), Subnet: subnet, ProxyPort: proxy, DNSPort: dns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := m.Reconcile(); err != nil {
			t.Errorf("reconcile: %v", err)
		}
		if err := m.CheckClean(); err != nil {
			t.Error(err)
		}
	})
	return m
}

// The namespace's only ways out are the redirects: TCP to anywhere lands
// on the proxy port with its original destination readable, DNS on the
// resolver port; UDP elsewhere, link-local and metadata addresses are
// dropped and counted; and everything is gone after Delete.
func TestLinkRules(t *testing.T) {
	requireRoot(t)
	proxy := listenTCP(t)
	dnsConn, err := net.ListenUDP("udp4", &net.UDPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	defer dnsConn.Close()
	m := newManager(t, uint16(proxy.Addr().(*net.TCPAddr).Port), uint16(dnsConn.LocalAddr().(*net.UDPAddr).Port))
	l, err := m.Create()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Delete(l); err != nil {
			t.Error(err)
		}
		if _, err := netlink.LinkByName(l.HostIf); err == nil {
			t.Errorf("link %s still there", l.HostIf)
		}
		if _, err := os.Stat(l.NSPath); err == nil {
			t.Errorf("namespace %s still there", l.NSPath)
		}
	}()

	// TCP to an address that is nowhere: the proxy port answers.
	accepted := make(chan netip.AddrPort, 1)
	go func() {
		c, err := proxy.AcceptTCP()
		if err != nil {
			return
		}
		defer c.Close()
		od, err := netns.OriginalDst(c)
		if err != nil {
			t.Error(err)
		}
		accepted <- od
		c.Write([]byte("hi"))
	}()
	err = netns.Do(l.NSPath, func() error {
		c, err := net.DialTimeout("tcp4", "198.51.100.7:443", 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		b := make([]byte, 2)
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		_, err = c.Read(b)
		return err
	})
	if err != nil {
		t.Fatalf("TCP from the namespace did not reach the proxy port: %v", err)
	}
	if od := <-accepted; od.String() != "198.51.100.7:443" {
		t.Errorf("original destination %s, want 198.51.100.7:443", od)
	}

	// DNS to the gateway: the resolver port gets it.
	err = netns.Do(l.NSPath, func() error {
		c, err := net.Dial("udp4", net.JoinHostPort(l.HostIP.String(), "53"))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("query"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	dnsConn.SetReadDeadline(time.Now().Add(3 * time.Second))
	b := make([]byte, 64)
	n, from, err := dnsConn.ReadFromUDP(b)
	if err != nil || string(b[:n]) != "query" {
		t.Fatalf("DNS did not reach the resolver port: %v", err)
	}
	if from.IP.String() != l.SandboxIP.String() {
		t.Errorf("query from %s, want %s", from.IP, l.SandboxIP)
	}

	// UDP to the metadata address, to another port of the gateway and to
	// a private address: dropped and counted.
	err = netns.Do(l.NSPath, func() error {
		for _, a := range []string{"169.254.169.254:80", net.JoinHostPort(l.HostIP.String(), "9999"), "10.9.9.9:53"} {
			c, err := net.Dial("udp4", a)
			if err != nil {
				return err
			}
			c.Write([]byte("x"))
			c.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The packets may still be on their way through the link: poll.
	var ctr map[string]uint64
	counted := func() bool {
		var err error
		if ctr, err = m.Counters(l); err != nil {
			t.Fatal(err)
		}
		return ctr[netns.CounterMetadata] >= 1 && ctr[netns.CounterDropped] >= 2 && ctr[netns.CounterDNS] >= 1 && ctr[netns.CounterTCP] >= 1
	}
	if !testreq.Poll(5*time.Second, counted) {
		t.Errorf("counters %v: want metadata >= 1, dropped >= 2, dns >= 1, tcp >= 1", ctr)
	}
	if !strings.HasPrefix(l.HostIf, l.Name) {
		t.Errorf("host link %s not named after %s", l.HostIf, l.Name)
	}
}

// Reconcile removes what a crashed process left under its prefix.
func TestReconcile(t *testing.T) {
	requireRoot(t)
	m := newManager(t, 1, 2)
	l, err := m.Create()
	if err != nil {
		t.Fatal(err)
	}
	// A second manager with the same prefix stands for the restarted
	// process: it holds nothing, so everything is left over.
	m2, err := netns.New(m.Config())
	if err != nil {
		t.Fatal(err)
	}
	names, err := m2.Reconcile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, l.Name) || !slices.Contains(names, m.Config().Prefix) {
		t.Errorf("reconciled %v, want %s and the shared table %s", names, l.Name, m.Config().Prefix)
	}
	if err := m2.CheckClean(); err != nil {
		t.Error(err)
	}
}
