package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
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

// fleetOptions are the settings of a node of a fleet. Without --etcd
// there is no fleet and none of them is used.
type fleetOptions struct {
	etcd      string
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
	fs.StringVar(&o.secret, "fleet-secret", "", "secret every node of the fleet shares, marking requests one node forwards to another; at least 16 bytes (env AIRLOCK_FLEET_SECRET)")
	fs.DurationVar(&o.leaseTTL, "fleet-lease-ttl", fleet.DefaultLeaseTTL, "how long a node that stopped renewing its etcd lease stays a member; its sessions are marked lost after it")
	fs.IntVar(&o.k, "fleet-k", fleet.DefaultK, "live nodes a placement samples (best of K)")
	fs.Float64Var(&o.cpus, "fleet-cpus", 0, "CPUs this node offers to placements (default: the machine's)")
	fs.Int64Var(&o.memoryMiB, "fleet-memory-mib", 0, "memory in MiB this node offers to placements (default: the machine's)")
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
	if o.cpus == 0 {
		o.cpus = float64(runtime.NumCPU())
	}
	if o.memoryMiB == 0 {
		o.memoryMiB = machineMemoryMiB()
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
func (o *fleetOptions) client() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(o.etcd, ","),
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
func startFleet(ctx context.Context, o fleetOptions, sizes map[airlock.SessionSize]session.Size, runLimits airlock.Limits,
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
		NodeID:    o.nodeID,
		Addr:      o.advertise,
		Tiers:     tierList,
		Capacity:  fleet.Capacity{CPUMilli: int64(o.cpus * 1000), MemoryMiB: o.memoryMiB, Sessions: maxSessions, Runs: maxRuns},
		Demand:    demand,
		Secret:    o.secret,
		Local:     fleetLocal{sessions: sessions, prov: prov},
		Store:     store,
		LeaseTTL:  o.leaseTTL,
		K:         o.k,
		Prefix:    o.prefix,
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
