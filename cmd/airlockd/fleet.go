package main

import (
	"context"
	"errors"
	"flag"
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
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/session"
)

// fleetOptions are the settings of a node of a fleet. Without --etcd
// there is no fleet and none of them is used.
type fleetOptions struct {
	etcd      string
	etcdCA    string
	etcdCert  string
	etcdKey   string
	etcdUser  string
	etcdPass  string
	ranges    string
	nodeID    string
	advertise string
	secret    string
	leaseTTL  time.Duration
	k         int
	cpus      float64
	memoryMiB int64
	prefix    string
}

func (o *fleetOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.etcd, "etcd", envOr("AIRLOCK_ETCD", ""), "etcd client URLs, comma-separated: run this node as part of a fleet (membership, placement, forwarding); empty for a single node (env AIRLOCK_ETCD)")
	fs.StringVar(&o.nodeID, "node-id", envOr("AIRLOCK_NODE_ID", ""), "this node's name in the fleet, the same across restarts (default: the host name) (env AIRLOCK_NODE_ID)")
	fs.StringVar(&o.advertise, "advertise", "", "base URL other nodes forward to, http://host:port (default: http:// and the --listen address)")
	fs.StringVar(&o.etcdCA, "etcd-ca", envOr("AIRLOCK_ETCD_CA", ""), "CA certificate (PEM) that verifies the etcd members (https:// endpoints; default the system's roots) (env AIRLOCK_ETCD_CA)")
	fs.StringVar(&o.etcdCert, "etcd-cert", envOr("AIRLOCK_ETCD_CERT", ""), "client certificate (PEM) for etcd members that require one, with --etcd-key (env AIRLOCK_ETCD_CERT)")
	fs.StringVar(&o.etcdKey, "etcd-key", envOr("AIRLOCK_ETCD_KEY", ""), "key (PEM) of --etcd-cert (env AIRLOCK_ETCD_KEY)")
	fs.StringVar(&o.etcdUser, "etcd-user", envOr("AIRLOCK_ETCD_USER", ""), "etcd user, for a cluster with auth enabled; its password from AIRLOCK_ETCD_PASSWORD (env AIRLOCK_ETCD_USER)")
	fs.StringVar(&o.ranges, "fleet-node-range", envOr("AIRLOCK_FLEET_NODE_RANGE", ""), "address ranges (CIDR, comma-separated) the fleet's nodes are reached at; forwards go to no other address, and sandboxes' egress never reaches these (default loopback and the private ranges) (env AIRLOCK_FLEET_NODE_RANGE)")
	fs.StringVar(&o.secret, "fleet-secret", "", "secret every node of the fleet shares: the key of the HMAC each forwarded request is signed with (method, path, time, nonce, body); at least 16 bytes (env AIRLOCK_FLEET_SECRET)")
	fs.DurationVar(&o.leaseTTL, "fleet-lease-ttl", fleet.DefaultLeaseTTL, "how long a node that stopped renewing its etcd lease stays a member; its sessions are marked lost after it")
	fs.IntVar(&o.k, "fleet-k", fleet.DefaultK, "live nodes a placement samples (best of K)")
	fs.Float64Var(&o.cpus, "fleet-cpus", 0, "CPUs the sessions placed on this node may reserve in all (0: no bound beyond --max-sessions, as a node alone); one-shot runs are bounded by --max-concurrent only")
	fs.Int64Var(&o.memoryMiB, "fleet-memory-mib", 0, "memory in MiB the sessions placed on this node may reserve in all (0: no bound beyond --max-sessions, as a node alone)")
	fs.StringVar(&o.prefix, "fleet-prefix", fleet.DefaultPrefix, "etcd key prefix of the fleet (ends in /)")
}

func (o *fleetOptions) enabled() bool { return o.etcd != "" }

// resolve fills defaults and checks the settings before anything starts.
func (o *fleetOptions) resolve(listen string) error {
	if !o.enabled() {
		return nil
	}
	if o.secret == "" {
		o.secret = os.Getenv("AIRLOCK_FLEET_SECRET")
	}
	o.etcdPass = os.Getenv("AIRLOCK_ETCD_PASSWORD")
	if err := o.etcdConfig().Validate(); err != nil {
		return fmt.Errorf("--etcd: %w", err)
	}
	if _, err := o.nodeRanges(); err != nil {
		return err
	}
	if len(o.secret) < fleet.MinSecretBytes {
		return fmt.Errorf("--etcd needs --fleet-secret (or AIRLOCK_FLEET_SECRET) of at least %d bytes", fleet.MinSecretBytes)
	}
	if o.nodeID == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-id: %w", err)
		}
		o.nodeID = h
	}
	if o.advertise == "" {
		host, port, err := net.SplitHostPort(listen)
		if err != nil || port == "0" {
			return errors.New("--etcd needs --advertise when --listen has no fixed port")
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			h, _ := os.Hostname()
			host = h
		}
		o.advertise = "http://" + net.JoinHostPort(host, port)
	}
	if o.cpus < 0 || o.memoryMiB < 0 {
		return errors.New("--fleet-cpus and --fleet-memory-mib must not be negative")
	}
	return nil
}

func (o *fleetOptions) etcdConfig() fleet.EtcdConfig {
	return fleet.EtcdConfig{Endpoints: splitList(o.etcd), CAFile: o.etcdCA, CertFile: o.etcdCert, KeyFile: o.etcdKey,
		Username: o.etcdUser, Password: o.etcdPass}
}

// nodeRanges are --fleet-node-range, or the fleet's defaults.
func (o *fleetOptions) nodeRanges() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range splitList(o.ranges) {
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
func (o *fleetOptions) infrastructure(storeURL string) []netip.Prefix {
	if !o.enabled() {
		return nil
	}
	out, _ := o.nodeRanges()
	hosts := []string{}
	for _, e := range splitList(o.etcd) {
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

// fleetLocal is what the fleet sees of this node.
type fleetLocal struct {
	sessions *session.Manager
	prov     *provision.Provisioner
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
	return st
}

var _ fleet.Local = fleetLocal{}

// startFleet joins the fleet named by --etcd. It returns nil, and no
// error, without --etcd.
func startFleet(ctx context.Context, o fleetOptions, sizes map[airlock.SessionSize]session.Size, runLimits airlock.Limits,
	maxSessions, maxRuns int, stateDir string, sessions *session.Manager, prov *provision.Provisioner, store fleet.Store,
	auth fleet.Authenticator, logger *slog.Logger) (*fleet.Fleet, *clientv3.Client, error) {
	if !o.enabled() {
		return nil, nil, nil
	}
	cli, err := o.etcdConfig().Client()
	if err != nil {
		return nil, nil, fmt.Errorf("--etcd: %w", err)
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
		NodeID: o.nodeID,
		Addr:   o.advertise,
		Tiers:  tierList,
		// What this node would take alone: its own admission's counts.
		Capacity:   fleet.Capacity{CPUMilli: int64(o.cpus * 1000), MemoryMiB: o.memoryMiB, Sessions: maxSessions, Runs: maxRuns},
		Demand:     demand,
		Secret:     o.secret,
		Auth:       auth,
		NodeRanges: ranges,
		Local:      fleetLocal{sessions: sessions, prov: prov},
		Store:      store,
		LeaseTTL:   o.leaseTTL,
		K:          o.k,
		Prefix:     o.prefix,
		LeaseFile:  filepath.Join(stateDir, "fleet.lease"),
		// Forwards carry the trace on (a forward span per hop).
		WrapTransport: func(base http.RoundTripper) http.RoundTripper { return &tracing.Transport{Base: base} },
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
