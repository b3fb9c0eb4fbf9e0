package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/service/broker"
	"github.com/airlockhq/airlock/service/egress"
)

// EgressConfig are the operator's network settings.
type EgressConfig struct {
	// Disabled runs no egress proxy: sandboxes never get a network.
	Disabled bool
	// Prefix names this node's sandbox namespaces, links and nftables
	// tables; Subnet is the IPv4 range their links are carved from
	// (both default from the state directory).
	Prefix string
	Subnet string
	// ProxyPort and DNSPort are the proxy's and the resolver's ports
	// (0: any free port).
	ProxyPort int
	DNSPort   int
	// Upstreams are the DNS servers sandbox names are resolved with
	// (default: the nameservers of /etc/resolv.conf).
	Upstreams []string
	// Permit are CIDR ranges exempt from the forbidden ranges.
	Permit []string
	// QuotaMiB is what one sandbox may move through the proxy (-1:
	// unlimited).
	QuotaMiB int64
	// Allow are the tenants' default allow lists for /v1/execute with
	// allow_network, by tenant name or ID ("*" for every tenant without
	// its own).
	Allow map[string][]string
	// BrokerConfig is the credential broker's scopes file; none when
	// empty.
	BrokerConfig string
}

// allowFor is a tenant's default allow list: its own, else the one for *.
func (o EgressConfig) allowFor(t *airlock.Tenant) []string {
	if t == nil {
		return nil
	}
	if l, ok := o.Allow[t.Name]; ok {
		return l
	}
	if l, ok := o.Allow[t.ID]; ok {
		return l
	}
	return o.Allow["*"]
}

// startEgress makes the egress service and the broker, whose credentials
// it adds to secrets. It returns nil when egress is off. Call reconcile
// before serving.
func startEgress(o EgressConfig, stateDir string, audit airlock.EgressStore, grants broker.Grants, tenants egress.TenantMeter, secrets *secretscan.Known,
	deny []netip.Prefix, logger *slog.Logger) (*egress.Service, error) {
	if o.Disabled {
		if len(o.Allow) > 0 || o.BrokerConfig != "" {
			return nil, fmt.Errorf("--network-allow and --broker-config need egress (drop --no-egress)")
		}
		return nil, nil
	}
	// Defaults that differ between state directories and stay the same
	// across restarts of one: the reconciler of a restarted airlockd
	// finds what it left, and never what another airlockd holds.
	sum := sha256.Sum256([]byte(stateDir))
	if o.Prefix == "" {
		o.Prefix = "a" + hex.EncodeToString(sum[:2])
	}
	if o.Subnet == "" {
		o.Subnet = fmt.Sprintf("10.231.%d.0/22", int(sum[2]%64)*4)
	}
	subnet, err := netip.ParsePrefix(o.Subnet)
	if err != nil {
		return nil, fmt.Errorf("--egress-subnet: %w", err)
	}
	var permit []netip.Prefix
	for _, p := range o.Permit {
		pp, err := netip.ParsePrefix(p)
		if err != nil {
			return nil, fmt.Errorf("--egress-permit: %w", err)
		}
		permit = append(permit, pp)
	}
	quota := o.QuotaMiB << 20
	if o.QuotaMiB < 0 {
		quota = -1
	}
	var svc *egress.Service
	var b airlock.Broker
	if o.BrokerConfig != "" {
		scopes, err := broker.LoadFile(o.BrokerConfig)
		if err != nil {
			return nil, err
		}
		var res *egress.Resolver
		if up := o.Upstreams; len(up) > 0 {
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
		Prefix:     o.Prefix,
		Subnet:     subnet,
		ProxyPort:  o.ProxyPort,
		DNSPort:    o.DNSPort,
		Upstreams:  o.Upstreams,
		Permit:     permit,
		Deny:       deny,
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
