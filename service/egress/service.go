package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/netns"
)

// Config configures a Service.
type Config struct {
	// Store keeps the audit log; required.
	Store airlock.EgressStore
	// Broker serves http://broker.airlock.internal/...; nil means no
	// broker (its name does not resolve and sessions cannot list scopes).
	Broker airlock.Broker

	// Prefix names the namespaces, links and nftables tables (1 to 6
	// lower-case letters and digits); "alk" if empty. The reconciler
	// removes everything of this prefix it does not hold.
	Prefix string
	// NetNSDir is where namespaces are mounted; /run/netns if empty.
	NetNSDir string
	// Subnet is the IPv4 range the sandboxes' /30 links come from;
	// 10.231.0.0/16 if not set. It must not overlap a network the host
	// uses.
	Subnet netip.Prefix

	// ListenAddr is the host address the proxy and the resolver listen on
	// (connections are redirected to their ports); 0.0.0.0 if not set.
	// Connections and queries from anything but a live sandbox are
	// refused.
	ListenAddr netip.Addr
	// ProxyPort and DNSPort; 0 picks free ports.
	ProxyPort int
	DNSPort   int

	// Upstreams are the DNS servers (host:port) the node resolves names
	// with; the nameservers of /etc/resolv.conf if empty.
	Upstreams []string
	// Permit exempts address ranges from the forbidden ranges (for a
	// corporate network the operator trusts, or a test network). It can
	// never permit loopback, link-local (metadata), multicast or
	// unspecified addresses.
	Permit []netip.Prefix
	// Deny are ranges refused whatever Permit says: in a fleet, the
	// addresses of etcd, the store and the other nodes.
	Deny []netip.Prefix

	// QuotaBytes is each sandbox's budget of bytes through the proxy, up
	// and down together; 1 GiB if zero, unlimited if negative. Over it,
	// every connection is cut and new ones are refused.
	QuotaBytes int64
	// Tenants, when set, counts every tenant's bytes against its budget
	// of the day (a *quota.Ledger). Once a tenant's budget is used up,
	// every connection of its sandboxes is cut (reason
	// tenant-quota-exceeded) and new ones are refused until the next UTC
	// day: as for QuotaBytes, at most one chunk per open connection
	// passes the budget.
	Tenants TenantMeter
	// PeekTimeout is how long the proxy waits for a client's first bytes
	// (a ClientHello, a request head) before it treats the connection as
	// another protocol; 3 s if zero.
	PeekTimeout time.Duration
	// DialTimeout bounds the proxy's connection to an upstream; 10 s if
	// zero.
	DialTimeout time.Duration
	// MaxConnections bounds the connections one sandbox has open through
	// the proxy at once (256); more are refused.
	MaxConnections int

	Logger *slog.Logger
	Now    func() time.Time
}

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if c.Store == nil {
		return errors.New("egress: a store for the audit log is required")
	}
	if c.Prefix == "" {
		c.Prefix = "alk"
	}
	if !c.Subnet.IsValid() {
		c.Subnet = netip.MustParsePrefix("10.231.0.0/16")
	}
	if !c.ListenAddr.IsValid() {
		c.ListenAddr = netip.IPv4Unspecified()
	}
	if !c.ListenAddr.Is4() {
		return errors.New("egress: listen address must be IPv4")
	}
	if c.ProxyPort < 0 || c.ProxyPort > 65535 || c.DNSPort < 0 || c.DNSPort > 65535 {
		return errors.New("egress: ports must be 0 to 65535")
	}
	if len(c.Upstreams) == 0 {
		up, err := SystemResolvers("/etc/resolv.conf")
		if err != nil {
			return fmt.Errorf("egress: no upstream DNS servers given and %w", err)
		}
		c.Upstreams = up
	}
	for _, p := range c.Permit {
		if !p.IsValid() {
			return errors.New("egress: invalid permitted range")
		}
		if AlwaysForbidden(p.Addr()) || AlwaysForbidden(lastAddr(p)) {
			return fmt.Errorf("egress: %s covers loopback, link-local, metadata or multicast addresses, which are never permitted", p)
		}
	}
	if c.QuotaBytes == 0 {
		c.QuotaBytes = 1 << 30
	}
	if c.Tenants == nil {
		c.Tenants = noMeter{}
	}
	if c.PeekTimeout <= 0 {
		c.PeekTimeout = 3 * time.Second
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 10 * time.Second
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = 256
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	p = p.Masked()
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Service is the node's egress control: it makes sandbox networks, runs
// the transparent proxy and the resolver they are redirected to, and
// writes the audit log. It implements airlock.Egress.
type Service struct {
	cfg      Config
	nets     *netns.Manager
	resolver *Resolver
	addrs    *addrPolicy
	audit    *auditLog

	proxyLn  *net.TCPListener
	dnsUDP   *dns.Server
	dnsTCP   *dns.Server
	started  bool
	closing  chan struct{}
	serveErr chan error
	wg       sync.WaitGroup

	mu    sync.RWMutex
	bySrc map[netip.Addr]*attachment // by sandbox address
}

var _ airlock.Egress = (*Service)(nil)

// New returns a service. It opens its listeners (so their ports are known)
// but changes nothing else on the host; call Reconcile, then Start.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	res, err := NewResolver(cfg.Upstreams, 3*time.Second)
	if err != nil {
		return nil, err
	}
	s := &Service{
		cfg:      cfg,
		resolver: res,
		addrs:    &addrPolicy{permit: cfg.Permit, deny: cfg.Deny},
		closing:  make(chan struct{}),
		serveErr: make(chan error, 3),
		bySrc:    map[netip.Addr]*attachment{},
	}
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IP(cfg.ListenAddr.AsSlice()), Port: cfg.ProxyPort})
	if err != nil {
		return nil, fmt.Errorf("egress: proxy listener: %w", err)
	}
	s.proxyLn = ln
	if err := s.listenDNS(); err != nil {
		ln.Close()
		return nil, err
	}
	nets, err := netns.New(netns.Config{
		Prefix:    cfg.Prefix,
		Dir:       cfg.NetNSDir,
		Subnet:    cfg.Subnet,
		ProxyPort: uint16(s.ProxyPort()),
		DNSPort:   uint16(s.DNSPort()),
		Logger:    cfg.Logger,
	})
	if err != nil {
		s.closeListeners()
		return nil, err
	}
	s.nets = nets
	s.audit = newAuditLog(cfg.Store, cfg.Logger)
	return s, nil
}

// ProxyPort is the port the proxy listens on.
func (s *Service) ProxyPort() int { return s.proxyLn.Addr().(*net.TCPAddr).Port }

// DNSPort is the port the resolver listens on (UDP and TCP).
func (s *Service) DNSPort() int { return s.dnsUDP.PacketConn.LocalAddr().(*net.UDPAddr).Port }

// Networks is the namespace manager (for tests and the reconciler).
func (s *Service) Networks() *netns.Manager { return s.nets }

// Reconcile removes the sandbox networks a crashed run left. Call it once
// at start, after the backend's reconciler ended the sandboxes.
func (s *Service) Reconcile(ctx context.Context) ([]string, error) {
	return s.nets.Reconcile()
}

// CheckClean reports any network of this service's prefix left on the
// host.
func (s *Service) CheckClean() error { return s.nets.CheckClean() }

// Start serves the proxy and the resolver.
func (s *Service) Start() {
	if s.started {
		return
	}
	s.started = true
	s.wg.Add(3)
	go func() { defer s.wg.Done(); s.serveProxy() }()
	go func() { defer s.wg.Done(); s.serveErr <- s.dnsUDP.ActivateAndServe() }()
	go func() { defer s.wg.Done(); s.serveErr <- s.dnsTCP.ActivateAndServe() }()
}

// Close cuts every connection, removes every network still attached,
// stops the listeners and writes the rest of the audit log.
func (s *Service) Close(ctx context.Context) error {
	select {
	case <-s.closing:
		return nil
	default:
	}
	close(s.closing)
	s.mu.RLock()
	var all []*attachment
	for _, a := range s.bySrc {
		all = append(all, a)
	}
	s.mu.RUnlock()
	var errs []error
	for _, a := range all {
		if err := a.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	s.closeListeners()
	if s.started {
		s.wg.Wait()
	}
	s.audit.close()
	if err := s.nets.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (s *Service) closeListeners() {
	s.proxyLn.Close()
	// Shutdown fails when the server has not activated yet (Close right
	// after Start), and ActivateAndServe would then serve forever: closing
	// the socket as well ends it either way.
	if s.dnsUDP != nil {
		if s.started {
			s.dnsUDP.Shutdown()
		}
		s.dnsUDP.PacketConn.Close()
	}
	if s.dnsTCP != nil {
		if s.started {
			s.dnsTCP.Shutdown()
		}
		s.dnsTCP.Listener.Close()
	}
}

// Flush waits until every event recorded so far is in the store.
func (s *Service) Flush(ctx context.Context) { s.audit.flush(ctx) }

// Record adds an event to the audit log (the broker records its calls
// with it).
func (s *Service) Record(ev *airlock.EgressEvent) {
	if ev.Time.IsZero() {
		ev.Time = s.cfg.Now().UTC()
	}
	s.audit.record(ev)
}

// HasBrokerScope reports whether the broker has a scope of that name.
func (s *Service) HasBrokerScope(name string) bool {
	return s.cfg.Broker != nil && s.cfg.Broker.HasScope(name)
}

// BrokerGranted checks the tenant's grant of a broker scope.
func (s *Service) BrokerGranted(ctx context.Context, tenantID, scope string) error {
	if s.cfg.Broker == nil {
		return airlock.Problem(airlock.EFORBIDDEN, "broker-unavailable", "this node runs no credential broker")
	}
	return s.cfg.Broker.Granted(ctx, tenantID, scope)
}

// lookup returns the attachment whose sandbox has address a.
func (s *Service) lookup(a netip.Addr) *attachment {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.bySrc[a.Unmap()]
}

// Attach makes a sandbox network under the request's policy.
func (s *Service) Attach(ctx context.Context, req airlock.NetworkRequest) (airlock.NetworkAttachment, error) {
	select {
	case <-s.closing:
		return nil, airlock.Problem(airlock.EUNAVAILABLE, "shutting-down", "the server is shutting down")
	default:
	}
	if (req.SessionID == "") == (req.ExecutionID == "") {
		return nil, errors.New("egress: a network belongs to exactly one session or execution")
	}
	pol, err := NewPolicy(req.Policy)
	if err != nil {
		return nil, err
	}
	for _, sc := range req.BrokerScopes {
		if !s.HasBrokerScope(sc) {
			return nil, airlock.Problem(airlock.EINVALID, "unknown-broker-scope", "the credential broker of this node has no scope %q", sc)
		}
	}
	l, err := s.nets.Create()
	if err != nil {
		return nil, fmt.Errorf("egress: make the sandbox network: %w", err)
	}
	return s.serve(l, req, pol), nil
}

// serve starts serving the network l under req and pol.
func (s *Service) serve(l *netns.Link, req airlock.NetworkRequest, pol *Policy) *attachment {
	a := &attachment{
		s:      s,
		req:    req,
		link:   l,
		conns:  map[*proxyConn]struct{}{},
		names:  map[netip.Addr]string{},
		closed: make(chan struct{}),
	}
	a.policy.Store(pol)
	s.mu.Lock()
	s.bySrc[l.SandboxIP] = a
	s.mu.Unlock()
	return a
}

var _ airlock.NetworkReattacher = (*Service)(nil)

// ReattachNetwork takes back the network name, which an earlier process
// made for a sandbox that lives on, and serves it under req from now on.
// Packets its rules dropped before are not reported again.
func (s *Service) ReattachNetwork(ctx context.Context, name string, req airlock.NetworkRequest) (airlock.NetworkAttachment, error) {
	select {
	case <-s.closing:
		return nil, airlock.Problem(airlock.EUNAVAILABLE, "shutting-down", "the server is shutting down")
	default:
	}
	pol, err := NewPolicy(req.Policy)
	if err != nil {
		return nil, err
	}
	l, err := s.nets.Adopt(name)
	if err != nil {
		return nil, err
	}
	a := s.serve(l, req, pol)
	if ctr, err := s.nets.Counters(l); err == nil {
		a.mu.Lock()
		a.drops = map[string]uint64{}
		for _, k := range dropCounters {
			a.drops[k] = ctr[k]
		}
		a.mu.Unlock()
	}
	return a, nil
}

// resolvConf is the sandbox's /etc/resolv.conf: the host end of its link.
func resolvConf(l *netns.Link) string {
	return "# written by airlock: the only resolver this sandbox can reach\n" +
		"nameserver " + l.HostIP.String() + "\n" +
		"options ndots:0 timeout:2 attempts:2\n"
}

// ownerOf fills the owner fields of an event.
func (a *attachment) event(kind string) *airlock.EgressEvent {
	return &airlock.EgressEvent{
		TenantID:    a.req.TenantID,
		SessionID:   a.req.SessionID,
		ExecutionID: a.req.ExecutionID,
		Time:        a.s.cfg.Now().UTC(),
		Kind:        kind,
	}
}

func joinAddrs(as []netip.Addr) string {
	ss := make([]string, len(as))
	for i, a := range as {
		ss[i] = a.String()
	}
	return strings.Join(ss, ",")
}
