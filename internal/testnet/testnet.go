// Package testnet builds a little internet for tests on this machine: a
// network namespace the test owns, joined to the host by a veth pair and
// routed as one /24 of 198.18.0.0/15 (the benchmarking range, never routed
// on the internet), with servers the test starts in it, a certificate
// authority the test made, and a DNS server that answers the test's names
// and nothing else. Nothing it starts listens outside that namespace, and
// everything is removed when the test ends.
package testnet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"

	"github.com/airlockhq/airlock/internal/netns"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// Internet is one test's internet.
type Internet struct {
	t      testing.TB
	Name   string
	NSPath string
	hostIf string
	// Prefix is the /24 the internet's addresses come from; tests permit
	// it in the egress config (it is in a forbidden range by default).
	Prefix netip.Prefix
	// HostIP is the host's end of the link; DNSAddr the resolver's address.
	HostIP  netip.Addr
	DNSAddr netip.Addr

	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	CAPEM  []byte

	mu      sync.Mutex
	next    int
	names   map[string][]netip.Addr
	queries []string
}

// New builds an internet; it skips the test when not root (see
// testreq.Skip).
func New(t testing.TB) *Internet {
	t.Helper()
	if os.Geteuid() != 0 {
		testreq.Skip(t, "skipped: needs root (network namespaces)")
	}
	// Names and the /24 are random; tests of several packages make
	// internets at once, and two may draw the same name or /24 (the
	// kernel then answers EEXIST): draw again.
	var n *Internet
	for attempt := 0; ; attempt++ {
		var r [3]byte
		rand.Read(r[:])
		n = &Internet{
			t:      t,
			Name:   "ti" + hex.EncodeToString(r[:2]),
			Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18 + r[2]&1, r[0], 0}), 24),
			next:   10,
			names:  map[string][]netip.Addr{},
		}
		b := n.Prefix.Addr().As4()
		n.HostIP = netip.AddrFrom4([4]byte{b[0], b[1], b[2], 1})
		n.DNSAddr = netip.AddrFrom4([4]byte{b[0], b[1], b[2], 2})
		n.hostIf = n.Name + "h"
		path, err := netns.NewNamed(netns.DefaultDir, n.Name)
		if errors.Is(err, os.ErrExist) && attempt < 16 {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		n.NSPath = path
		err = n.link()
		if err == nil {
			t.Cleanup(n.remove)
			break
		}
		n.remove()
		if !errors.Is(err, syscall.EEXIST) || attempt >= 16 {
			t.Fatal(err)
		}
	}
	n.makeCA()
	n.serveDNS()
	return n
}

func (n *Internet) link() error {
	ns, err := os.Open(n.NSPath)
	if err != nil {
		return err
	}
	defer ns.Close()
	if err := netlink.LinkAdd(&netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: n.hostIf},
		PeerName:      "eth0",
		PeerNamespace: netlink.NsFd(int(ns.Fd())),
	}); err != nil {
		return err
	}
	hl, err := netlink.LinkByName(n.hostIf)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(hl, &netlink.Addr{IPNet: &net.IPNet{IP: n.HostIP.AsSlice(), Mask: net.CIDRMask(30, 32)}}); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(hl); err != nil {
		return err
	}
	// Everything of the /24 is in the namespace.
	if err := netlink.RouteAdd(&netlink.Route{
		LinkIndex: hl.Attrs().Index,
		Dst:       &net.IPNet{IP: n.Prefix.Addr().AsSlice(), Mask: net.CIDRMask(24, 32)},
		Gw:        n.DNSAddr.AsSlice(),
	}); err != nil {
		return err
	}
	return netns.Do(n.NSPath, func() error {
		lo, _ := netlink.LinkByName("lo")
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		el, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(el, &netlink.Addr{IPNet: &net.IPNet{IP: n.DNSAddr.AsSlice(), Mask: net.CIDRMask(30, 32)}}); err != nil {
			return err
		}
		// No route but the link itself: the internet talks to the host's
		// end of it and to nothing else.
		return netlink.LinkSetUp(el)
	})
}

func (n *Internet) remove() {
	if hl, err := netlink.LinkByName(n.hostIf); err == nil {
		netlink.LinkDel(hl)
	}
	if err := netns.DeleteNamed(n.NSPath); err != nil {
		n.t.Errorf("remove test internet: %v", err)
	}
}

// Addr gives the internet a new address (on its loopback) and returns it.
func (n *Internet) Addr() netip.Addr {
	n.mu.Lock()
	n.next++
	if n.next > 250 {
		n.mu.Unlock()
		n.t.Fatal("testnet: out of addresses")
	}
	b := n.Prefix.Addr().As4()
	a := netip.AddrFrom4([4]byte{b[0], b[1], b[2], byte(n.next)})
	n.mu.Unlock()
	err := netns.Do(n.NSPath, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}})
	})
	if err != nil {
		n.t.Fatal(err)
	}
	return a
}

// Listen opens a listener in the internet.
func (n *Internet) Listen(network string, ap netip.AddrPort) net.Listener {
	var ln net.Listener
	err := netns.Do(n.NSPath, func() error {
		var err error
		ln, err = net.Listen(network, ap.String())
		return err
	})
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { ln.Close() })
	return ln
}

// SetName makes the internet's DNS answer name with addrs (none: the name
// is removed).
func (n *Internet) SetName(name string, addrs ...netip.Addr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	name = strings.ToLower(dns.Fqdn(name))
	if len(addrs) == 0 {
		delete(n.names, name)
		return
	}
	n.names[name] = addrs
}

// Queries returns the names the internet's DNS was asked, in order.
func (n *Internet) Queries() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.queries...)
}

// Upstream is the DNS server to give the egress service.
func (n *Internet) Upstream() string { return netip.AddrPortFrom(n.DNSAddr, 53).String() }

func (n *Internet) serveDNS() {
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if len(r.Question) == 1 {
			q := r.Question[0]
			name := strings.ToLower(q.Name)
			n.mu.Lock()
			n.queries = append(n.queries, strings.TrimSuffix(name, "."))
			addrs, ok := n.names[name]
			n.mu.Unlock()
			if !ok {
				m.Rcode = dns.RcodeNameError
			}
			for _, a := range addrs {
				if q.Qtype == dns.TypeA && a.Is4() {
					m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: a.AsSlice()})
				}
			}
		}
		w.WriteMsg(m)
	})
	var pc net.PacketConn
	var ln net.Listener
	err := netns.Do(n.NSPath, func() error {
		var err error
		if pc, err = net.ListenPacket("udp4", netip.AddrPortFrom(n.DNSAddr, 53).String()); err != nil {
			return err
		}
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(n.DNSAddr, 53).String())
		return err
	})
	if err != nil {
		n.t.Fatal(err)
	}
	us := &dns.Server{PacketConn: pc, Handler: h}
	ts := &dns.Server{Listener: ln, Handler: h}
	go us.ActivateAndServe()
	go ts.ActivateAndServe()
	n.t.Cleanup(func() { us.Shutdown(); ts.Shutdown() })
}

func (n *Internet) makeCA() {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		n.t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "airlock test CA " + n.Name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		n.t.Fatal(err)
	}
	n.caCert, _ = x509.ParseCertificate(der)
	n.caKey = key
	n.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// CertPool holds the internet's CA.
func (n *Internet) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(n.caCert)
	return p
}

// Certificate issues a server certificate for names.
func (n *Internet) Certificate(names ...string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		n.t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, n.caCert, &key.PublicKey, n.caKey)
	if err != nil {
		n.t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Server is an HTTP(S) server in the internet.
type Server struct {
	Addr netip.Addr
	srv  *http.Server
}

// ServeHTTP starts an HTTP server on a new address, port 80, and with
// tlsNames also HTTPS on port 443 with a certificate for them. It returns
// the address.
func (n *Internet) ServeHTTP(h http.Handler, tlsNames ...string) netip.Addr {
	a := n.Addr()
	ln := n.Listen("tcp4", netip.AddrPortFrom(a, 80))
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	n.t.Cleanup(func() { srv.Close() })
	if len(tlsNames) > 0 {
		tln := n.Listen("tcp4", netip.AddrPortFrom(a, 443))
		cert := n.Certificate(tlsNames...)
		tsrv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
		go tsrv.ServeTLS(tln, "", "")
		n.t.Cleanup(func() { tsrv.Close() })
	}
	return a
}
