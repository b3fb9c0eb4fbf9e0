package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/service/broker"
	"github.com/airlockhq/airlock/service/egress"
)

// egressOptions are the operator's network settings.
type egressOptions struct {
	disabled     bool
	prefix       string
	subnet       string
	proxyPort    int
	dnsPort      int
	upstreams    string
	permit       string
	quotaMiB     int64
	allow        allowFlag
	brokerConfig string
}

func (o *egressOptions) register(fs *flag.FlagSet) {
	o.allow = allowFlag{}
	fs.BoolVar(&o.disabled, "no-egress", false, "run no egress proxy: sandboxes never get a network (allow_list sessions and allow_network are refused)")
	fs.StringVar(&o.prefix, "egress-prefix", "", "names of this node's sandbox namespaces, links and nftables tables (1 to 6 lower-case letters and digits; default from the state directory, so two airlockds on one host never touch each other's)")
	fs.StringVar(&o.subnet, "egress-subnet", "", "IPv4 range the sandboxes' links are carved from (a /30 each); must not overlap a network the host uses (default a /22 of 10.231.0.0/16 chosen by the state directory)")
	fs.IntVar(&o.proxyPort, "egress-proxy-port", 0, "port of the egress proxy every sandbox TCP connection is redirected to (0: any free port)")
	fs.IntVar(&o.dnsPort, "egress-dns-port", 0, "port of the sandbox resolver (UDP and TCP; 0: any free port)")
	fs.StringVar(&o.upstreams, "egress-upstream-dns", "", "DNS servers (host:port, comma-separated) the node resolves sandbox names with (default: the nameservers of /etc/resolv.conf)")
	fs.StringVar(&o.permit, "egress-permit", "", "address ranges (CIDR, comma-separated) exempt from the forbidden ranges, e.g. a trusted corporate network; loopback, link-local and metadata are never permitted")
	fs.Int64Var(&o.quotaMiB, "egress-quota-mib", 1024, "bytes (in MiB) one sandbox may move through the proxy, up and down together (-1: unlimited)")
	fs.Var(o.allow, "network-allow", "default allow list of a tenant for /v1/execute with allow_network: TENANT=host[:port],... (repeatable; TENANT * for every tenant without its own)")
	fs.StringVar(&o.brokerConfig, "broker-config", "", "credential broker scopes (JSON file, see README); none when empty")
}

// allowFlag collects --network-allow TENANT=entries.
type allowFlag map[string][]string

func (f allowFlag) String() string {
	var out []string
	for k, v := range f {
		out = append(out, k+"="+strings.Join(v, ","))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func (f allowFlag) Set(v string) error {
	tenant, list, ok := strings.Cut(v, "=")
	if !ok || tenant == "" {
		return fmt.Errorf("want TENANT=host[:port],...")
	}
	var entries []string
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e != "" {
			entries = append(entries, e)
		}
	}
	if _, err := airlock.ParseAllowList(entries); err != nil {
		return err
	}
	f[tenant] = entries
	return nil
}

// allowFor is a tenant's default allow list: its own, else the one for *.
func (o *egressOptions) allowFor(t *airlock.Tenant) []string {
	if t == nil {
		return nil
	}
	if l, ok := o.allow[t.Name]; ok {
		return l
	}
	if l, ok := o.allow[t.ID]; ok {
		return l
	}
	return o.allow["*"]
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// startEgress makes the egress service and the broker, whose credentials
// it adds to secrets. It returns nil when egress is off. Call reconcile
// before serving.
func startEgress(o egressOptions, stateDir string, audit airlock.EgressStore, grants broker.Grants, tenants egress.TenantMeter, secrets *secretscan.Known, logger *slog.Logger) (*egress.Service, error) {
	if o.disabled {
		if len(o.allow) > 0 || o.brokerConfig != "" {
			return nil, fmt.Errorf("--network-allow and --broker-config need egress (drop --no-egress)")
		}
		return nil, nil
	}
	// Defaults that differ between state directories and stay the same
	// across restarts of one: the reconciler of a restarted airlockd
	// finds what it left, and never what another airlockd holds.
	sum := sha256.Sum256([]byte(stateDir))
	if o.prefix == "" {
		o.prefix = "a" + hex.EncodeToString(sum[:2])
	}
	if o.subnet == "" {
		o.subnet = fmt.Sprintf("10.231.%d.0/22", int(sum[2]%64)*4)
	}
	subnet, err := netip.ParsePrefix(o.subnet)
	if err != nil {
		return nil, fmt.Errorf("--egress-subnet: %w", err)
	}
	var permit []netip.Prefix
	for _, p := range splitList(o.permit) {
		pp, err := netip.ParsePrefix(p)
		if err != nil {
			return nil, fmt.Errorf("--egress-permit: %w", err)
		}
		permit = append(permit, pp)
	}
	quota := o.quotaMiB << 20
	if o.quotaMiB < 0 {
		quota = -1
	}
	var svc *egress.Service
	var b airlock.Broker
	if o.brokerConfig != "" {
		scopes, err := broker.LoadFile(o.brokerConfig)
		if err != nil {
			return nil, err
		}
		var res *egress.Resolver
		if up := splitList(o.upstreams); len(up) > 0 {
			res, err = egress.NewResolver(up, 3*time.Second)
		} else if sys, serr := egress.SystemResolvers("/etc/resolv.conf"); serr == nil {
			res, err = egress.NewResolver(sys, 3*time.Second)
		}
		if err != nil {
			return nil, err
		}
		cfg := broker.Config{
			Scopes: scopes,
			Grants: grants,
			// The broker records through the egress service made below.
			Record: func(ev *airlock.EgressEvent) { svc.Record(ev) },
			Logger: logger,
		}
		if res != nil {
			cfg.LookupHost = res.LookupHost
		}
		bk, err := broker.New(cfg)
		if err != nil {
			return nil, err
		}
		b = bk
		secrets.AddSource(brokerSecrets(bk))
		logger.Info("credential broker ready", "scopes", bk.Scopes())
	}
	svc, err = egress.New(egress.Config{
		Store:      audit,
		Broker:     b,
		Prefix:     o.prefix,
		Subnet:     subnet,
		ProxyPort:  o.proxyPort,
		DNSPort:    o.dnsPort,
		Upstreams:  splitList(o.upstreams),
		Permit:     permit,
		QuotaBytes: quota,
		Tenants:    tenants,
		Logger:     logger,
	})
	if err != nil {
		return nil, err
	}
	return svc, nil
}

// reconcileEgress removes what a crashed run left of sandbox networks and
// starts the proxy and the resolver.
func reconcileEgress(ctx context.Context, svc *egress.Service, logger *slog.Logger) error {
	if svc == nil {
		return nil
	}
	left, err := svc.Reconcile(ctx)
	if len(left) > 0 {
		logger.Warn("reconciler removed sandbox networks left by an earlier run", "count", len(left), "names", left)
	}
	if err != nil {
		return fmt.Errorf("reconcile sandbox networks: %w", err)
	}
	svc.Start()
	logger.Info("egress proxy serving", "proxy_port", svc.ProxyPort(), "dns_port", svc.DNSPort())
	return nil
}

// egressOf is the service as the domain interface, nil (not a typed nil)
// when egress is off.
func egressOf(svc *egress.Service) airlock.Egress {
	if svc == nil {
		return nil
	}
	return svc
}

func egressLogOf(svc *egress.Service, store airlock.EgressStore) airlock.EgressStore {
	if svc == nil {
		return nil
	}
	return store
}
