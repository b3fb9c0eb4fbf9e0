package egress

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// alwaysForbidden are never reachable through the proxy, whatever the
// operator permits: loopback, link-local (with the cloud metadata
// addresses 169.254.169.254 and fd00:ec2::254 below it), multicast,
// unspecified and broadcast.
var alwaysForbidden = prefixes(
	"0.0.0.0/8",          // "this network"
	"127.0.0.0/8",        // loopback
	"169.254.0.0/16",     // link-local, cloud metadata
	"224.0.0.0/4",        // multicast
	"255.255.255.255/32", // broadcast
	"::/128",             // unspecified
	"::1/128",            // loopback
	"fe80::/10",          // link-local
	"ff00::/8",           // multicast
	"fd00:ec2::254/128",  // AWS metadata over IPv6
)

// DefaultForbidden are the ranges a resolved address may not be in unless
// the operator permits them (Config.Permit): every range that is not
// globally routable (the IANA special-purpose registries), and the
// translation ranges that could lead into one.
var DefaultForbidden = append(prefixes(
	"10.0.0.0/8",      // private
	"100.64.0.0/10",   // CGNAT (shared address space)
	"172.16.0.0/12",   // private
	"192.0.0.0/24",    // IETF protocol assignments
	"192.0.2.0/24",    // TEST-NET-1
	"192.88.99.0/24",  // 6to4 relay anycast
	"192.168.0.0/16",  // private
	"198.18.0.0/15",   // benchmarking
	"198.51.100.0/24", // TEST-NET-2
	"203.0.113.0/24",  // TEST-NET-3
	"240.0.0.0/4",     // reserved
	"::ffff:0:0/96",   // IPv4-mapped (checked as IPv4 too)
	"64:ff9b::/96",    // NAT64
	"64:ff9b:1::/48",  // local NAT64
	"100::/64",        // discard
	"2001::/23",       // IETF protocol assignments (Teredo among them)
	"2001:db8::/32",   // documentation
	"2002::/16",       // 6to4
	"fc00::/7",        // unique local
	"fec0::/10",       // site-local (deprecated)
), alwaysForbidden...)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// addrPolicy decides which resolved addresses the proxy and the resolver
// may hand out or connect to.
type addrPolicy struct {
	permit []netip.Prefix
	deny   []netip.Prefix // refused before permit is read

	mu         sync.Mutex
	local      map[netip.Addr]bool // the host's own addresses
	localAt    time.Time
	localAddrs func() ([]net.Addr, error)
}

// isLocal reports whether a is one of the host's own addresses (read
// again every few seconds): a name that resolves to the host must not
// reach its services, whatever range the address is in.
func (p *addrPolicy) isLocal(a netip.Addr) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.local == nil || time.Since(p.localAt) > 5*time.Second {
		list := p.localAddrs
		if list == nil {
			list = net.InterfaceAddrs
		}
		addrs, err := list()
		if err == nil {
			p.local = map[netip.Addr]bool{}
			for _, ad := range addrs {
				if n, ok := ad.(*net.IPNet); ok {
					if ip, ok := netip.AddrFromSlice(n.IP); ok {
						p.local[ip.Unmap()] = true
					}
				}
			}
			p.localAt = time.Now()
		}
	}
	return p.local[a]
}

// forbidden reports whether a may not be connected to, and why.
func (p *addrPolicy) forbidden(a netip.Addr) (bool, string) {
	if !a.IsValid() {
		return true, "invalid address"
	}
	a = a.Unmap()
	for _, f := range alwaysForbidden {
		if f.Contains(a) {
			return true, describe(a)
		}
	}
	if p.isLocal(a) {
		return true, "address of this host"
	}
	for _, d := range p.deny {
		if d.Contains(a) {
			return true, "address of the fleet's infrastructure"
		}
	}
	for _, ok := range p.permit {
		if ok.Contains(a) {
			return false, ""
		}
	}
	for _, f := range DefaultForbidden {
		if f.Contains(a) {
			return true, describe(a)
		}
	}
	return false, ""
}

// AlwaysForbidden reports whether a is in a range no configuration can
// permit (loopback, link-local and metadata, multicast, unspecified).
func AlwaysForbidden(a netip.Addr) bool {
	a = a.Unmap()
	for _, f := range alwaysForbidden {
		if f.Contains(a) {
			return true
		}
	}
	return false
}

func describe(a netip.Addr) string {
	switch {
	case a == netip.MustParseAddr("169.254.169.254") || a == netip.MustParseAddr("fd00:ec2::254"):
		return "cloud metadata address"
	case a.IsLoopback():
		return "loopback address"
	case a.IsLinkLocalUnicast():
		return "link-local address"
	case a.IsMulticast() || a.IsLinkLocalMulticast():
		return "multicast address"
	case a.IsPrivate():
		return "private address"
	case a.Is4() && netip.MustParsePrefix("100.64.0.0/10").Contains(a):
		return "CGNAT address"
	case a.IsUnspecified():
		return "unspecified address"
	}
	return "special-purpose (not globally routable) address"
}
