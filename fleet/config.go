package fleet

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/airlockhq/airlock"
)

// Defaults of Config.
const (
	DefaultPrefix     = "/airlock/"
	DefaultLeaseTTL   = 10 * time.Second
	DefaultK          = 2
	DefaultSweepEvery = 2 * time.Second
	DefaultPendingTTL = 2 * time.Minute
	DefaultRunTTL     = 10 * time.Minute
	DefaultReapEvery  = time.Second
	// MaxSkew is how far a forwarded request's signed time may be from
	// the receiver's clock; a nonce is remembered this long on each side.
	MaxSkew            = 30 * time.Second
	MinSecretBytes     = 16
	MaxPlacedBodyBytes = 8 << 20
)

// Kind is what a placement is for.
type Kind string

const (
	KindSession Kind = "session" // a session (or E2B sandbox): held until it ends
	KindRun     Kind = "run"     // a one-shot run: held while it runs
)

// Capacity is what a node offers to placements. Sessions and Runs are
// the node's own admission (its --max-sessions and --max-concurrent), so
// a node of a fleet takes what it would take alone. CPUMilli and
// MemoryMiB, when positive, also bound what the sessions placed on the
// node reserve in all; zero is no bound beyond the counts (a node alone
// overcommits CPU and memory the same way). One-shot runs are bounded by
// Runs only: sessions, idle or not, never take a run's slot.
type Capacity struct {
	CPUMilli  int64 `json:"cpu_milli"`
	MemoryMiB int64 `json:"memory_mib"`
	Sessions  int   `json:"sessions"`
	Runs      int   `json:"runs"`
}

// Request is what placement knows of a request: read from its body.
type Request struct {
	Kind      Kind
	Image     string
	Language  string
	Size      string
	Isolation string
	// Template is the ID of the template the request starts from ("":
	// none): nodes that hold it (Status.Templates) score higher.
	Template string
	// Volume names a volume the request mounts and VolumeNode the node
	// that holds it: only that node may serve the request, and while it
	// is not a live member the request is refused (volume-unavailable).
	Volume, VolumeNode string
}

// Demand is what a placed request reserves on its node.
type Demand struct {
	CPUMilli  int64
	MemoryMiB int64
}

// Status is a node's load now, published in its record.
type Status struct {
	Running       int            `json:"running"`         // sandboxes running (sessions and runs)
	PoolReady     map[string]int `json:"pool_ready"`      // ready pool members by image
	PoolMemoryMiB int64          `json:"pool_memory_mib"` // memory the idle pool members hold
	// Templates are the IDs of the templates whose rootfs the node holds
	// (built or pulled), at most MaxStatusTemplates.
	Templates []string `json:"templates,omitempty"`
}

// MaxStatusTemplates bounds Status.Templates: a node with more publishes
// those it made or pulled last.
const MaxStatusTemplates = 64

// Local is what the fleet needs of this node's sessions.
type Local interface {
	// Held lists the sessions this node has by its own records (live
	// or paused).
	Held(ctx context.Context) ([]string, error)
	// Abandon destroys a session's sandbox on this node and records the
	// session lost (the fleet no longer assigns it here).
	Abandon(ctx context.Context, id, detail string) error
	// Status is the node's load now.
	Status(ctx context.Context) Status
}

// Store is what the reaper needs of the shared store.
type Store interface {
	// MarkNodeLost records every unfinished session of the node lost
	// (end reason node_lost, with detail) and fails its running
	// executions; it returns how many of each it changed.
	MarkNodeLost(ctx context.Context, nodeID, detail string) (sessions, executions int, err error)
	// LiveSessionNodes lists the node IDs that have unfinished sessions.
	LiveSessionNodes(ctx context.Context) ([]string, error)
}

// Config configures a Fleet.
type Config struct {
	Client *clientv3.Client // required
	// NodeID names this node, the same across its restarts (its records
	// carry it): 1 to 64 of [A-Za-z0-9._-].
	NodeID string
	// Addr is the base URL other nodes forward this node's requests to
	// (http://host:port).
	Addr string
	// Tiers are the isolation levels this node offers (airlock.Isolation
	// values).
	Tiers []string
	// Capacity is what this node offers to placements.
	Capacity Capacity
	// Demand maps a request to what it reserves; required.
	Demand func(Request) (Demand, error)
	// Secret is the key of the HMAC every forwarded request carries
	// (over its method, target, time, nonce and body): the same on every
	// node, at least MinSecretBytes. It never travels on the wire.
	Secret string
	// Auth authenticates a client's request before it is placed or
	// routed (no etcd call is made for an anonymous request); required.
	Auth Authenticator
	// Affinity, if set, says which template and volume a placed request
	// names, for its tenant (nil: placement by load alone).
	Affinity Affinity
	// NodeRanges are the address ranges forwarded requests may be sent
	// to: a node whose address resolves outside them is never dialed.
	// Default DefaultNodeRanges (loopback and the private ranges).
	NodeRanges []netip.Prefix
	Local      Local // required
	Store      Store // required
	// LeaseTTL is how long a node that stopped renewing stays a member.
	LeaseTTL time.Duration
	// K is how many live nodes a placement samples.
	K int
	// Prefix is the etcd key prefix of the fleet (ends in "/").
	Prefix string
	// LeaseFile, if set, keeps the lease ID so a restart within the TTL
	// takes the same lease (and keeps its sessions' mappings).
	LeaseFile string
	// SweepEvery is how often a node frees the reservations and
	// mappings of its sessions that ended; PendingTTL how long a
	// reservation may wait for its session; RunTTL how long a run's
	// reservation may live; ReapEvery how often the elected reaper
	// compares the store with the members.
	SweepEvery, PendingTTL, RunTTL, ReapEvery time.Duration
	// WrapTransport, if set, wraps the transport that carries forwarded
	// requests (tracing); the transport it wraps dials only NodeRanges.
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// PreviewHost, if set, reads a preview URL's Host
	// ({port}-{session_id}.{preview domain}): such a request goes to the
	// node holding the session, with its Host kept, whatever its path.
	PreviewHost func(host string) (sessionID string, ok bool)
	Logger      *slog.Logger
}

// Validate reports whether c can be used; zero durations, K, Prefix and
// Logger take defaults.
func (c *Config) Validate() error {
	switch {
	case c.Client == nil:
		return airlock.Errorf(airlock.EINVALID, "fleet: an etcd client is required")
	case !validNodeID(c.NodeID):
		return airlock.Errorf(airlock.EINVALID, "fleet: node ID must be 1 to 64 of A-Z a-z 0-9 . _ -")
	case c.Demand == nil || c.Local == nil || c.Store == nil || c.Auth == nil:
		return airlock.Errorf(airlock.EINVALID, "fleet: demand, local, store and auth are required")
	case len(c.Secret) < MinSecretBytes:
		return airlock.Errorf(airlock.EINVALID, "fleet: the secret must be at least %d bytes", MinSecretBytes)
	case c.Capacity.MemoryMiB < 0 || c.Capacity.CPUMilli < 0 || c.Capacity.Sessions <= 0 || c.Capacity.Runs <= 0:
		return airlock.Errorf(airlock.EINVALID, "fleet: capacity needs positive sessions and runs, and CPU and memory not negative")
	case c.LeaseTTL != 0 && c.LeaseTTL < 2*time.Second:
		return airlock.Errorf(airlock.EINVALID, "fleet: lease TTL must be at least 2s")
	case c.K < 0:
		return airlock.Errorf(airlock.EINVALID, "fleet: K must not be negative")
	}
	u, err := url.Parse(c.Addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return airlock.Errorf(airlock.EINVALID, "fleet: address must be http(s)://host:port, not %q", c.Addr)
	}
	if c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/") {
		return airlock.Errorf(airlock.EINVALID, "fleet: prefix must end in /")
	}
	for _, p := range c.NodeRanges {
		if !p.IsValid() {
			return airlock.Errorf(airlock.EINVALID, "fleet: invalid node address range")
		}
	}
	for _, t := range c.Tiers {
		if !airlock.Isolation(t).Valid() {
			return airlock.Errorf(airlock.EINVALID, "fleet: unknown isolation tier %q", t)
		}
	}
	return nil
}

func (c *Config) defaults() {
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.K == 0 {
		c.K = DefaultK
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.SweepEvery <= 0 {
		c.SweepEvery = DefaultSweepEvery
	}
	if c.PendingTTL <= 0 {
		c.PendingTTL = DefaultPendingTTL
	}
	if c.RunTTL <= 0 {
		c.RunTTL = DefaultRunTTL
	}
	if c.ReapEvery <= 0 {
		c.ReapEvery = DefaultReapEvery
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if len(c.NodeRanges) == 0 {
		c.NodeRanges = DefaultNodeRanges()
	}
	c.Addr = strings.TrimSuffix(c.Addr, "/")
}

func validNodeID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Keys of the fleet in etcd.
func (c *Config) nodeKey(id string) string           { return c.Prefix + "nodes/" + id }
func (c *Config) nodesPrefix() string                { return c.Prefix + "nodes/" }
func (c *Config) allocPrefix(node string) string     { return c.Prefix + "alloc/" + node + "/" }
func (c *Config) allocsPrefix() string               { return c.Prefix + "alloc/" }
func (c *Config) sessionKey(id string) string        { return c.Prefix + "sessions/" + id }
func (c *Config) sessionsPrefix() string             { return c.Prefix + "sessions/" }
func (c *Config) electionPrefix() string             { return c.Prefix + "reaper" }
func (c *Config) allocKey(node, id string) string    { return c.allocPrefix(node) + id }
func lastSegment(key string) string                  { return key[strings.LastIndexByte(key, '/')+1:] }
func errorf(code, f string, a ...any) *airlock.Error { return airlock.Errorf(code, "fleet: "+f, a...) }

// DefaultNodeRanges are the ranges nodes may be reached at when
// Config.NodeRanges is empty: loopback and the private ranges (RFC 1918,
// shared address space, unique local).
func DefaultNodeRanges() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{"127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// Authenticator says which tenant a client's request is from (the REST
// API's bearer keys, and the E2B API's X-API-Key). An error is a refusal:
// airlock.EUNAUTHORIZED (or ENOTFOUND) for a missing or wrong key, any
// other for a failure to decide.
type Authenticator interface {
	Authenticate(r *http.Request) (tenantID string, err error)
}

// AuthFunc adapts a function to Authenticator.
type AuthFunc func(r *http.Request) (string, error)

// Authenticate implements Authenticator.
func (f AuthFunc) Authenticate(r *http.Request) (string, error) { return f(r) }

var _ Authenticator = AuthFunc(nil)
