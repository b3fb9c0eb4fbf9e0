package egress

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/netns"
)

// attachment is one sandbox's network: its link, its policy, the
// connections open through the proxy and the names its resolver handed
// out.
type attachment struct {
	s    *Service
	req  airlock.NetworkRequest
	link *netns.Link

	policy    atomic.Pointer[Policy]
	attempts  atomic.Int64 // connections and queries
	used      atomic.Int64 // bytes through the proxy, both ways
	open      atomic.Int64 // connections being decided or relayed
	overQuota atomic.Bool

	mu     sync.Mutex
	conns  map[*proxyConn]struct{}
	names  map[netip.Addr]string // address -> the name the resolver answered it for
	drops  map[string]uint64     // counter values already reported
	closed chan struct{}

	closeOnce sync.Once
	closeErr  error
}

var _ airlock.NetworkAttachment = (*attachment)(nil)

// Sandbox says how to start the sandbox in this network.
func (a *attachment) Sandbox() *airlock.SandboxNetwork {
	return &airlock.SandboxNetwork{NetNSPath: a.link.NSPath, ResolvConf: resolvConf(a.link)}
}

// Link is the network's plumbing (for tests).
func (a *attachment) Link() *netns.Link { return a.link }

func (a *attachment) isClosed() bool {
	select {
	case <-a.closed:
		return true
	default:
		return false
	}
}

// SetPolicy replaces the allow list. New connections and queries follow it
// at once; open connections it no longer admits are closed.
func (a *attachment) SetPolicy(ctx context.Context, p airlock.NetworkPolicy) error {
	pol, err := NewPolicy(p)
	if err != nil {
		return err
	}
	a.policy.Store(pol)
	ev := a.event(airlock.EgressPolicy)
	ev.Verdict = airlock.VerdictAllowed
	ev.Reason = "policy-replaced"
	ev.Detail = p.Mode + ": " + strings.Join(p.Allow, ", ")
	a.s.Record(ev)
	a.mu.Lock()
	var cut []*proxyConn
	for c := range a.conns {
		if c.broker {
			continue
		}
		if _, ok := pol.Admit(c.name, c.port, c.proto); !ok {
			cut = append(cut, c)
		}
	}
	a.mu.Unlock()
	for _, c := range cut {
		c.cut("policy-changed")
	}
	return nil
}

// addConn registers an open connection; false once the network is closed.
func (a *attachment) addConn(c *proxyConn) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.isClosed() {
		return false
	}
	a.conns[c] = struct{}{}
	return true
}

func (a *attachment) removeConn(c *proxyConn) {
	a.mu.Lock()
	delete(a.conns, c)
	a.mu.Unlock()
}

// remember notes the addresses the resolver handed out for name.
func (a *attachment) remember(name string, addrs []netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.names) > 4096 {
		a.names = map[netip.Addr]string{}
	}
	for _, ad := range addrs {
		a.names[ad] = name
	}
}

// nameFor returns the name the resolver answered ad for, if it did.
func (a *attachment) nameFor(ad netip.Addr) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.names[ad.Unmap()]
}

// charge counts n bytes against the sandbox's quota and its tenant's
// budget of the day; false once either is used up, and then every
// connection of the sandbox (of all the tenant's sandboxes, for the
// tenant's budget) is cut.
func (a *attachment) charge(n int64) bool {
	q := a.s.cfg.QuotaBytes
	used := int64(0)
	if q >= 0 {
		used = a.used.Add(n)
	}
	if a.s.cfg.Tenants.ChargeEgress(a.req.TenantID, n) < 0 {
		a.s.cutTenant(a.req.TenantID)
		return false
	}
	if q < 0 || used <= q {
		return true
	}
	if a.overQuota.CompareAndSwap(false, true) {
		a.cutAll("quota-exceeded")
	}
	return false
}

// cutAll cuts every open connection of the sandbox.
func (a *attachment) cutAll(reason string) {
	a.mu.Lock()
	var all []*proxyConn
	for c := range a.conns {
		all = append(all, c)
	}
	a.mu.Unlock()
	for _, c := range all {
		c.cut(reason)
	}
}

// chunk is how much the proxy may relay before it charges again: up to
// relayChunk, but never more than one byte past the sandbox's quota or
// its tenant's budget of the day.
func (a *attachment) chunk() int64 {
	n := int64(relayChunk)
	if left := a.tenantLeft(); left < n {
		n = max(left+1, 1)
	}
	q := a.s.cfg.QuotaBytes
	if q < 0 {
		return n
	}
	return min(n, max(q-a.used.Load()+1, 1))
}

// dropCounters are the rule counters that count as the sandbox trying to
// reach something (IPv6 and other non-IPv4 frames are left out: a network
// stack sends some on its own).
var dropCounters = []string{netns.CounterMetadata, netns.CounterSpoofed, netns.CounterDropped}

// Attempts counts connections, queries and dropped packets so far, and
// records an event for packets dropped since the last call.
// OverQuota reports whether the sandbox has used its egress byte budget
// (airlock.NetworkOverQuota).
func (a *attachment) OverQuota() bool { return a.overQuota.Load() }

func (a *attachment) Attempts(ctx context.Context) int64 {
	n := a.attempts.Load()
	return n + a.reportDrops()
}

// reportDrops reads the rule counters, records what grew since the last
// report, and returns the total of the counters that count as attempts.
func (a *attachment) reportDrops() int64 {
	ctr, err := a.s.nets.Counters(a.link)
	if err != nil {
		a.s.cfg.Logger.Warn("read the rule counters of a sandbox network", "network", a.link.Name, "err", err)
		return 0
	}
	a.mu.Lock()
	if a.drops == nil {
		a.drops = map[string]uint64{}
	}
	var total int64
	var parts []string
	for _, k := range dropCounters {
		total += int64(ctr[k])
		if d := ctr[k] - a.drops[k]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, d))
			a.drops[k] = ctr[k]
		}
	}
	a.mu.Unlock()
	if len(parts) > 0 {
		sort.Strings(parts)
		ev := a.event(airlock.EgressDrops)
		ev.Verdict = airlock.VerdictDenied
		ev.Reason = "dropped-by-rules"
		ev.Detail = "packets dropped by the sandbox network's rules: " + strings.Join(parts, " ")
		for _, p := range parts {
			if strings.HasPrefix(p, netns.CounterMetadata+"=") {
				ev.Flags = append(ev.Flags, "metadata")
			}
		}
		a.s.Record(ev)
	}
	return total
}

// Close cuts every connection, reports the last drops and removes the
// network. Call it after the sandbox is destroyed.
func (a *attachment) Close(ctx context.Context) error {
	a.end("sandbox-ended", true)
	return a.closeErr
}

// end stops serving the network once: its connections through the proxy
// are cut with reason, its last drops reported, and the service forgets
// it; remove also deletes the namespace, link and rules, else they are
// left for a later process (see Detach).
func (a *attachment) end(reason string, remove bool) {
	a.closeOnce.Do(func() {
		a.mu.Lock()
		close(a.closed)
		var all []*proxyConn
		for c := range a.conns {
			all = append(all, c)
		}
		a.mu.Unlock()
		for _, c := range all {
			c.cut(reason)
		}
		a.reportDrops()
		a.s.mu.Lock()
		if a.s.bySrc[a.link.SandboxIP] == a {
			delete(a.s.bySrc, a.link.SandboxIP)
		}
		a.s.mu.Unlock()
		if remove {
			a.closeErr = a.s.nets.Delete(a.link)
		} else {
			a.s.nets.Forget(a.link)
		}
	})
}

// Name names the network (its namespace and link), for a later process
// to take it back with ReattachNetwork.
func (a *attachment) Name() string { return a.link.Name }

// Detach lets go of the network for a later process while its sandbox
// lives on (a clean stop that keeps sessions): its connections through
// the proxy are cut and this process serves it no more, but the
// namespace, the link and the rules stay.
func (a *attachment) Detach() { a.end("server-restarting", false) }
