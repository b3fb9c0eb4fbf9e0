package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/internal/tracing"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/session"
)

// FleetConfig are the settings of a node of a fleet. Without Etcd there
// is no fleet and none of them is used.
type FleetConfig struct {
	// Etcd are the etcd client URLs.
	Etcd []string
	// NodeID is this node's name in the fleet (default: the host name).
	NodeID string
	// Advertise is the base URL other nodes forward to (default: http://
	// and the listen address).
	Advertise string
	// Secret marks requests one node forwards to another.
	Secret   string
	LeaseTTL time.Duration
	K        int
	// CPUs and MemoryMiB are what this node offers to placements
	// (default: the machine's).
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
	return nil
}

// machineMemoryMiB is MemTotal of /proc/meminfo, or 1 GiB if unreadable.
func machineMemoryMiB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			var kb int64
			if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
				return kb >> 10
			}
		}
	}
	return 1024
}

// client opens a client of the fleet's etcd.
func (o FleetConfig) client() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   o.Etcd,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("--etcd: %w", err)
	}
	return cli, nil
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
func startFleet(ctx context.Context, o FleetConfig, sizes map[airlock.SessionSize]session.Size, runLimits airlock.Limits,
	maxSessions, maxRuns int, stateDir string, sessions *session.Manager, prov *provision.Provisioner, store fleet.Store, logger *slog.Logger) (*fleet.Fleet, *clientv3.Client, error) {
	if !o.enabled() {
		return nil, nil, nil
	}
	cli, err := o.client()
	if err != nil {
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
		Client:    cli,
		NodeID:    o.NodeID,
		Addr:      o.Advertise,
		Tiers:     tierList,
		Capacity:  fleet.Capacity{CPUMilli: int64(o.CPUs * 1000), MemoryMiB: o.MemoryMiB, Sessions: maxSessions, Runs: maxRuns},
		Demand:    demand,
		Secret:    o.Secret,
		Local:     fleetLocal{sessions: sessions, prov: prov},
		Store:     store,
		LeaseTTL:  o.LeaseTTL,
		K:         o.K,
		Prefix:    o.Prefix,
		LeaseFile: filepath.Join(stateDir, "fleet.lease"),
		// Forwards carry the trace on (a forward span per hop).
		Transport: &tracing.Transport{},
		Logger:    logger,
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
	fl, cli, err := startFleet(ctx, c.Fleet, c.Sessions.Sizes, c.limits(), c.Sessions.Max, c.MaxConcurrent, c.StateDir, n.Sessions, n.Provisioner, n.Store, n.logger)
	if err != nil || fl == nil {
		return err
	}
	n.Fleet = fl
	n.onClose(func() { cli.Close() })
	// After the sessions stopped (registered later, so run earlier).
	n.onClose(n.closeWithin(10*time.Second, "leaving the fleet", func(ctx context.Context) error {
		return fl.Close(ctx, !c.KeepSessions)
	}))
	return nil
}
