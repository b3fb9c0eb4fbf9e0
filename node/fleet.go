package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/internal/tracing"
	"github.com/airlockhq/airlock/service/preview"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/session"
	"github.com/airlockhq/airlock/service/template"
)

// FleetConfig are the settings of a node of a fleet. Without Etcd there
// is no fleet and none of them is used.
type FleetConfig struct {
	// Etcd are the etcd client URLs.
	Etcd []string
	// EtcdCA is a CA certificate (PEM file) that verifies the etcd
	// members (https:// endpoints; default the system's roots).
	EtcdCA string
	// EtcdCert and EtcdKey are a client certificate and its key (PEM
	// files) for etcd members that require one.
	EtcdCert string
	EtcdKey  string
	// EtcdUser and EtcdPassword log in to an etcd cluster with auth
	// enabled.
	EtcdUser     string
	EtcdPassword string
	// NodeRanges are the address ranges (CIDR) the fleet's nodes are
	// reached at: forwards go to no other address, and sandboxes' egress
	// never reaches these (default fleet.DefaultNodeRanges: loopback and
	// the private ranges).
	NodeRanges []string
	// NodeID is this node's name in the fleet (default: the host name).
	NodeID string
	// Advertise is the base URL other nodes forward to (default: http://
	// and the listen address).
	Advertise string
	// Secret is the key of the HMAC each forwarded request is signed
	// with.
	Secret   string
	LeaseTTL time.Duration
	K        int
	// CPUs and MemoryMiB bound what the sessions placed on this node may
	// reserve in all (0: no bound beyond Sessions.Max, as a node alone);
	// one-shot runs are bounded by MaxConcurrent only.
	CPUs      float64
	MemoryMiB int64
	Prefix    string
}

func (o FleetConfig) enabled() bool { return len(o.Etcd) > 0 }

// validate checks the settings before anything starts.
func (o FleetConfig) validate(listen string) error {
	if !o.enabled() {
		return nil
	}
	if err := o.etcdConfig().Validate(); err != nil {
		return fmt.Errorf("--etcd: %w", err)
	}
	if _, err := o.nodeRanges(); err != nil {
		return err
	}
	if len(o.Secret) < fleet.MinSecretBytes {
		return fmt.Errorf("--etcd needs --fleet-secret (or AIRLOCK_FLEET_SECRET) of at least %d bytes", fleet.MinSecretBytes)
	}
	if o.NodeID == "" {
		if _, err := os.Hostname(); err != nil {
			return fmt.Errorf("--node-id: %w", err)
		}
	}
	if o.Advertise == "" {
		if _, port, err := net.SplitHostPort(listen); err != nil || port == "0" {
			return fmt.Errorf("--etcd needs --advertise when --listen has no fixed port")
		}
	}
	if o.CPUs < 0 || o.MemoryMiB < 0 {
		return errors.New("--fleet-cpus and --fleet-memory-mib must not be negative")
	}
	return nil
}

// etcdConfig is how the node's etcd clients (the fleet's and the
// quotas') connect.
func (o FleetConfig) etcdConfig() fleet.EtcdConfig {
	return fleet.EtcdConfig{Endpoints: o.Etcd, CAFile: o.EtcdCA, CertFile: o.EtcdCert, KeyFile: o.EtcdKey,
		Username: o.EtcdUser, Password: o.EtcdPassword}
}

// nodeRanges are --fleet-node-range, or the fleet's defaults.
func (o FleetConfig) nodeRanges() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range o.NodeRanges {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--fleet-node-range: %w", err)
		}
		out = append(out, p.Masked())
	}
	if len(out) == 0 {
		out = fleet.DefaultNodeRanges()
	}
	return out, nil
}

// infrastructure are the addresses sandboxes must never reach in a
// fleet, whatever --egress-permit says: the fleet's node ranges and the
// hosts of etcd and of the store (resolved now).
func (o FleetConfig) infrastructure(storeURL string) []netip.Prefix {
	if !o.enabled() {
		return nil
	}
	out, _ := o.nodeRanges()
	hosts := []string{}
	for _, e := range o.Etcd {
		if u, err := url.Parse(e); err == nil {
			hosts = append(hosts, u.Hostname())
		}
	}
	if u, err := url.Parse(storeURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
	}
	for _, h := range hosts {
		if a, err := netip.ParseAddr(h); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		ips, _ := net.LookupIP(h)
		for _, ip := range ips {
			if a, ok := netip.AddrFromSlice(ip); ok {
				out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			}
		}
	}
	return out
}

// client opens a client of the fleet's etcd, with the TLS and the user
// of the etcd options.
func (o FleetConfig) client() (*clientv3.Client, error) {
	cli, err := o.etcdConfig().Client()
	if err != nil {
		return nil, fmt.Errorf("--etcd: %w", err)
	}
	return cli, nil
}

// fleetLocal is what the fleet sees of this node.
type fleetLocal struct {
	sessions  *session.Manager
	prov      *provision.Provisioner
	templates func() []string // the IDs of the templates on this node's disk
}

func (l fleetLocal) Held(ctx context.Context) ([]string, error) { return l.sessions.Held(ctx) }
func (l fleetLocal) Abandon(ctx context.Context, id, detail string) error {
	return l.sessions.Abandon(ctx, id, detail)
}
func (l fleetLocal) Status(ctx context.Context) fleet.Status {
	var st fleet.Status
	if ids, err := l.sessions.Held(ctx); err == nil {
		st.Running = len(ids)
	}
	members, mem := l.prov.PoolStats()
	// The pool does not say which images its members are of; "*" is all.
	st.PoolReady, st.PoolMemoryMiB = map[string]int{"*": members}, mem>>20
	if l.templates != nil {
		if ids := l.templates(); len(ids) > 0 {
			st.Templates = ids[:min(len(ids), fleet.MaxStatusTemplates)]
		}
	}
	return st
}

// fleetAffinity reads a placed request's template and volumes in the
// shared store.
type fleetAffinity struct {
	templates func() *template.Service
	volumes   airlock.VolumeStore
}

// Template returns the ID of the tenant's template of that name (else
// the operator's), or "".
func (a fleetAffinity) Template(ctx context.Context, tenantID, name string) (string, error) {
	svc := a.templates()
	if svc == nil || airlock.ValidateTemplateName(name) != nil {
		return "", nil
	}
	t, err := svc.GetTemplate(ctx, &airlock.Tenant{ID: tenantID}, name)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return t.ID, nil
}

// VolumeNode returns the node holding the tenant's volume of that name.
func (a fleetAffinity) VolumeNode(ctx context.Context, tenantID, name string) (string, error) {
	if a.volumes == nil || !airlock.ValidVolumeName(name) {
		return "", nil
	}
	v, err := a.volumes.Volume(ctx, tenantID, name)
	if err != nil {
		return "", err
	}
	return v.Node, nil
}

var _ fleet.Affinity = fleetAffinity{}

var _ fleet.Local = fleetLocal{}

// startFleet joins the fleet named by --etcd. It returns nil, and no
// error, without --etcd.
func startFleet(ctx context.Context, o FleetConfig, sizes map[airlock.SessionSize]session.Size, runLimits airlock.Limits,
	maxSessions, maxRuns int, stateDir string, sessions *session.Manager, prov *provision.Provisioner, store fleet.Store,
	auth fleet.Authenticator, affinity fleet.Affinity, heldTemplates func() []string, previewDomain string, logger *slog.Logger) (*fleet.Fleet, *clientv3.Client, error) {
	if !o.enabled() {
		return nil, nil, nil
	}
	cli, err := o.client()
	if err != nil {
		return nil, nil, err
	}
	ranges, err := o.nodeRanges()
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	tiers := map[string]bool{}
	for _, b := range prov.Backends() {
		tiers[string(b.Capabilities().Isolation())] = true
	}
	var tierList []string
	for t := range tiers {
		tierList = append(tierList, t)
	}
	demand := func(r fleet.Request) (fleet.Demand, error) {
		if r.Kind == fleet.KindRun {
			return fleet.Demand{CPUMilli: int64(runLimits.CPUs * 1000), MemoryMiB: runLimits.MemoryBytes >> 20}, nil
		}
		size := airlock.SessionSize(r.Size)
		if size == "" || !size.Valid() {
			size = airlock.SizeSmall
		}
		s, ok := sizes[size]
		if !ok {
			s = session.DefaultSizes[size]
		}
		return fleet.Demand{CPUMilli: int64(s.CPUs * 1000), MemoryMiB: s.MemoryBytes >> 20}, nil
	}
	f, err := fleet.New(fleet.Config{
		Client: cli,
		NodeID: o.NodeID,
		Addr:   o.Advertise,
		Tiers:  tierList,
		// What this node would take alone: its own admission's counts.
		Capacity:   fleet.Capacity{CPUMilli: int64(o.CPUs * 1000), MemoryMiB: o.MemoryMiB, Sessions: maxSessions, Runs: maxRuns},
		Demand:     demand,
		Secret:     o.Secret,
		Auth:       auth,
		NodeRanges: ranges,
		Local:      fleetLocal{sessions: sessions, prov: prov, templates: heldTemplates},
		Affinity:   affinity,
		Store:      store,
		LeaseTTL:   o.LeaseTTL,
		K:          o.K,
		Prefix:     o.Prefix,
		LeaseFile:  filepath.Join(stateDir, "fleet.lease"),
		// Forwards carry the trace on (a forward span per hop).
		WrapTransport: func(base http.RoundTripper) http.RoundTripper { return &tracing.Transport{Base: base} },
		PreviewHost:   previewHostOf(previewDomain),
		Logger:        logger,
	})
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := f.Start(jctx); err != nil {
		cli.Close()
		return nil, nil, err
	}
	return f, cli, nil
}

// joinFleet joins the fleet named by Fleet.Etcd, if any. It comes before
// recover: a restart within the lease TTL takes its lease back, so the
// sessions recovered are still this node's.
func (n *Node) joinFleet(ctx context.Context) error {
	c := n.cfg
	fl, cli, err := startFleet(ctx, c.Fleet, c.Sessions.Sizes, c.limits(), c.Sessions.Max, c.MaxConcurrent, c.StateDir, n.Sessions, n.Provisioner, n.Store,
		n.fleetAuth(), fleetAffinity{templates: func() *template.Service { return n.Templates }, volumes: n.Store}, n.heldTemplates,
		c.Preview.Domain, n.logger)
	if err != nil || fl == nil {
		return err
	}
	n.Fleet, n.etcd = fl, cli
	n.onClose(func() { cli.Close() })
	// After the sessions stopped (registered later, so run earlier).
	n.onClose(n.closeWithin(10*time.Second, "leaving the fleet", func(ctx context.Context) error {
		return fl.Close(ctx, !c.KeepSessions)
	}))
	return nil
}

// fleetAuth is how the fleet learns a client's tenant before it places
// anything: what WithFleetAuthenticator gave, else the REST API's keys
// (the API is made after the fleet joins, and requests reach the fleet
// only once the node serves).
func (n *Node) fleetAuth() fleet.Authenticator {
	if n.parts.fleetAuth != nil {
		return n.parts.fleetAuth
	}
	return fleet.AuthFunc(func(r *http.Request) (string, error) {
		if n.api == nil {
			return "", airlock.Errorf(airlock.EUNAVAILABLE, "the API is not ready")
		}
		return n.api.Authenticate(r)
	})
}

// previewHostOf reads a preview URL's Host for the fleet's routing; nil
// without a preview domain.
func previewHostOf(domain string) func(string) (string, bool) {
	if domain == "" {
		return nil
	}
	return func(host string) (string, bool) {
		_, sid, _, err := preview.ParseHost(host, domain)
		return sid, err == nil
	}
}
