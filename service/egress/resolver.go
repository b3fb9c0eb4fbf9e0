package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Resolver looks names up at the node's upstream resolvers for the proxy
// and the sandbox resolver, with a small cache. The sandbox never talks to
// an upstream resolver itself.
type Resolver struct {
	servers []string // host:port
	timeout time.Duration
	maxTTL  time.Duration

	mu    sync.Mutex
	cache map[cacheKey]cacheEntry
}

type cacheKey struct {
	name  string
	qtype uint16
}

type cacheEntry struct {
	addrs   []netip.Addr
	rcode   int
	expires time.Time
}

// ErrNXDomain is returned for a name that does not exist.
var ErrNXDomain = errors.New("no such name")

// NewResolver returns a resolver asking servers (host:port) in turn.
func NewResolver(servers []string, timeout time.Duration) (*Resolver, error) {
	if len(servers) == 0 {
		return nil, errors.New("egress: no upstream DNS servers")
	}
	for _, s := range servers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, fmt.Errorf("egress: upstream DNS server %q: want host:port", s)
		}
	}
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	return &Resolver{servers: servers, timeout: timeout, maxTTL: 60 * time.Second, cache: map[cacheKey]cacheEntry{}}, nil
}

// SystemResolvers reads the nameservers of /etc/resolv.conf as host:port.
func SystemResolvers(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if a, err := netip.ParseAddr(fields[1]); err == nil {
				out = append(out, netip.AddrPortFrom(a, 53).String())
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("egress: no nameserver in %s", path)
	}
	return out, sc.Err()
}

// Lookup returns the addresses of name (A for qtype dns.TypeA, AAAA for
// dns.TypeAAAA), following CNAMEs the upstream returned, and how long they
// may be cached. A name that does not exist is ErrNXDomain.
func (r *Resolver) Lookup(ctx context.Context, name string, qtype uint16) ([]netip.Addr, time.Duration, error) {
	k := cacheKey{name, qtype}
	now := time.Now()
	r.mu.Lock()
	if e, ok := r.cache[k]; ok && now.Before(e.expires) {
		r.mu.Unlock()
		if e.rcode == dns.RcodeNameError {
			return nil, 0, ErrNXDomain
		}
		return e.addrs, e.expires.Sub(now), nil
	}
	r.mu.Unlock()

	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.RecursionDesired = true
	var in *dns.Msg
	var err error
	for _, s := range r.servers {
		in, err = r.exchange(ctx, m, s)
		if err == nil && in.Rcode != dns.RcodeServerFailure && in.Rcode != dns.RcodeRefused {
			break
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("egress: look up %s: %w", name, err)
	}
	switch in.Rcode {
	case dns.RcodeSuccess:
	case dns.RcodeNameError:
		r.store(k, cacheEntry{rcode: dns.RcodeNameError, expires: now.Add(5 * time.Second)})
		return nil, 0, ErrNXDomain
	default:
		return nil, 0, fmt.Errorf("egress: look up %s: %s", name, dns.RcodeToString[in.Rcode])
	}
	addrs, ttl := collect(in, dns.Fqdn(name), qtype)
	if ttl > r.maxTTL {
		ttl = r.maxTTL
	}
	if ttl < time.Second {
		ttl = time.Second
	}
	r.store(k, cacheEntry{addrs: addrs, expires: now.Add(ttl)})
	return addrs, ttl, nil
}

func (r *Resolver) store(k cacheKey, e cacheEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cache) > 4096 {
		now := time.Now()
		for k, v := range r.cache {
			if now.After(v.expires) {
				delete(r.cache, k)
			}
		}
		if len(r.cache) > 4096 {
			r.cache = map[cacheKey]cacheEntry{}
		}
	}
	r.cache[k] = e
}

func (r *Resolver) exchange(ctx context.Context, m *dns.Msg, server string) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	c := &dns.Client{Net: "udp", Timeout: r.timeout}
	in, _, err := c.ExchangeContext(ctx, m, server)
	if err == nil && in.Truncated {
		c.Net = "tcp"
		in, _, err = c.ExchangeContext(ctx, m, server)
	}
	if err != nil {
		return nil, err
	}
	if in.Id != m.Id {
		return nil, errors.New("reply does not match the query")
	}
	return in, nil
}

// collect follows the CNAME chain from name through the answer section and
// returns the addresses at its end, with the smallest TTL on the way.
func collect(in *dns.Msg, name string, qtype uint16) ([]netip.Addr, time.Duration) {
	target := strings.ToLower(name)
	ttl := uint32(1<<31 - 1)
	for hops := 0; hops < 8; hops++ {
		var addrs []netip.Addr
		next := ""
		for _, rr := range in.Answer {
			h := rr.Header()
			if !strings.EqualFold(h.Name, target) {
				continue
			}
			switch v := rr.(type) {
			case *dns.A:
				if qtype == dns.TypeA {
					if a, ok := netip.AddrFromSlice(v.A.To4()); ok {
						addrs = append(addrs, a)
						ttl = min(ttl, h.Ttl)
					}
				}
			case *dns.AAAA:
				if qtype == dns.TypeAAAA {
					if a, ok := netip.AddrFromSlice(v.AAAA.To16()); ok {
						addrs = append(addrs, a)
						ttl = min(ttl, h.Ttl)
					}
				}
			case *dns.CNAME:
				next = strings.ToLower(v.Target)
				ttl = min(ttl, h.Ttl)
			}
		}
		if len(addrs) > 0 || next == "" {
			if len(addrs) == 0 {
				ttl = 5
			}
			return addrs, time.Duration(ttl) * time.Second
		}
		target = next
	}
	return nil, 5 * time.Second
}

// LookupHost returns the IPv4 addresses of host, or its IPv6 ones when it
// has none (for the broker's upstream connections).
func (r *Resolver) LookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	addrs, _, err := r.Lookup(ctx, host, dns.TypeA)
	if err == nil && len(addrs) == 0 {
		addrs, _, err = r.Lookup(ctx, host, dns.TypeAAAA)
	}
	if err == nil && len(addrs) == 0 {
		err = fmt.Errorf("egress: %s has no address", host)
	}
	return addrs, err
}
