package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/node"
	"github.com/airlockhq/airlock/service/quota"
	"github.com/airlockhq/airlock/service/session"
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// flags are airlockd's command line: most bind straight to the fields of
// a node.Config; lists are read as comma-separated strings and split by
// config.
type flags struct {
	cfg           node.Config
	logLevel      string
	poolMemoryMiB int64
	warm          string
	warmSessions  string
	upstreams     string
	permit        string
	abusePools    string
	abuseDisable  string
	oldMasterKey  string
	etcd          string
}

// newFlags registers every flag of airlockd on fs, with node.Defaults
// (and the environment, where a flag says so) as the defaults.
func newFlags(fs *flag.FlagSet) *flags {
	f := &flags{cfg: node.Defaults()}
	f.registerNode(fs)
	f.registerSessions(fs)
	f.registerEgress(fs)
	f.registerAPI(fs)
	f.registerAbuse(fs)
	f.registerKeep(fs)
	f.registerFleet(fs)
	return f
}

// config is the node.Config the parsed flags say, with the values that
// come only from the environment (never shown by -help) filled in, and
// checked.
func (f *flags) config() (node.Config, error) {
	c := f.cfg
	if c.Store.URL == "" {
		c.Store.URL = os.Getenv("AIRLOCK_STORE")
	}
	if c.Store.URL == "" {
		c.Store.URL = "sqlite"
	}
	if c.API.PublicURL == "" {
		c.API.PublicURL = os.Getenv("AIRLOCK_PUBLIC_URL")
	}
	if c.API.MetricsKey == "" {
		c.API.MetricsKey = os.Getenv("AIRLOCK_METRICS_KEY")
	}
	if f.etcd != "" {
		c.Fleet.Etcd = strings.Split(f.etcd, ",")
		if c.Fleet.Secret == "" {
			c.Fleet.Secret = os.Getenv("AIRLOCK_FLEET_SECRET")
		}
	}
	c.Pool.MemoryBudget = f.poolMemoryMiB << 20
	c.Pool.Disabled = c.Pool.Max == 0
	c.Warm = splitList(f.warm)
	c.Sessions.Warm = splitList(f.warmSessions)
	c.Egress.Upstreams = splitList(f.upstreams)
	c.Egress.Permit = splitList(f.permit)
	c.Abuse.Pools = splitList(f.abusePools)
	c.Abuse.Disable = splitList(f.abuseDisable)
	c.Keep.OldMasterKeyFiles = splitList(f.oldMasterKey)
	return c, c.Validate()
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
	entries := splitList(list)
	if _, err := airlock.ParseAllowList(entries); err != nil {
		return err
	}
	f[tenant] = entries
	return nil
}

// templateFlag collects --e2b-template NAME=IMAGE.
type templateFlag map[string]string

func (f templateFlag) String() string {
	var out []string
	for k, v := range f {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func (f templateFlag) Set(v string) error {
	name, img, ok := strings.Cut(v, "=")
	if !ok || name == "" || img == "" {
		return fmt.Errorf("want NAME=IMAGE")
	}
	f[name] = img
	return nil
}

// sizeFlag collects --session-size NAME=CPUS,MEMORY_MIB,DISK_MB.
type sizeFlag map[airlock.SessionSize]session.Size

func (f sizeFlag) String() string {
	var out []string
	for k, v := range f {
		out = append(out, fmt.Sprintf("%s=%g,%d,%d", k, v.CPUs, v.MemoryBytes>>20, v.DiskBytes/1000/1000))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func (f sizeFlag) Set(v string) error {
	name, spec, ok := strings.Cut(v, "=")
	parts := strings.Split(spec, ",")
	if !ok || len(parts) != 3 || !airlock.SessionSize(name).Valid() {
		return fmt.Errorf("want NAME=CPUS,MEMORY_MIB,DISK_MB with NAME small, medium or large")
	}
	cpus, err1 := strconv.ParseFloat(parts[0], 64)
	mem, err2 := strconv.ParseInt(parts[1], 10, 64)
	disk, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || cpus <= 0 || mem <= 0 || disk <= 0 {
		return fmt.Errorf("CPUS, MEMORY_MIB and DISK_MB must be positive numbers")
	}
	pids := session.DefaultSizes[airlock.SessionSize(name)].Pids
	f[airlock.SessionSize(name)] = session.Size{CPUs: cpus, MemoryBytes: mem << 20, DiskBytes: disk * 1000 * 1000, Pids: pids}
	return nil
}

// registerNode registers the node-wide flags.
func (f *flags) registerNode(fs *flag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&c.Listen, "listen", envOr("AIRLOCK_LISTEN", c.Listen), "address to serve the API on (env AIRLOCK_LISTEN)")
	fs.StringVar(&c.StateDir, "state-dir", envOr("AIRLOCK_STATE_DIR", c.StateDir), "state directory: database, blobs, images, sandboxes (env AIRLOCK_STATE_DIR)")
	fs.StringVar(&c.AgentPath, "agent", c.AgentPath, "airlock-agent binary the images must carry (default: next to airlockd, if present)")
	fs.DurationVar(&c.MaxTimeout, "max-timeout", c.MaxTimeout, "longest wall time a request may ask for")
	fs.DurationVar(&c.DefaultTimeout, "default-timeout", c.DefaultTimeout, "wall time when a request names none")
	fs.IntVar(&c.MaxConcurrent, "max-concurrent", c.MaxConcurrent, "one-shot executions running at once on this node")
	fs.Float64Var(&c.TenantShare, "tenant-share", c.TenantShare, "share of the one-shot slots (--max-concurrent) one tenant may hold or wait for at once; past it a request gets a 429 at once")
	fs.IntVar(&c.MaxQueue, "max-queue", c.MaxQueue, "one-shot executions that may wait for a slot (default 4 x --max-concurrent); past it a request gets a 503 node-busy problem with Retry-After at once")
	fs.IntVar(&c.MaxStarts, "max-starts", c.MaxStarts, "sandboxes being made at once, restores and boots, pool fills included (default: the number of CPUs); a request that misses the pool beyond it waits for the next ready sandbox")
	fs.BoolVar(&c.KeepSessions, "keep-sessions", c.KeepSessions, "on SIGTERM or SIGINT, leave live sessions running for the next start to reattach (false: end them)")
	fs.Int64Var(&c.MemoryMiB, "memory-mib", c.MemoryMiB, "memory limit of a sandbox in MiB")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.IntVar(&c.Pool.Min, "pool-min", c.Pool.Min, "ready sandboxes kept per warm image/language even when idle")
	fs.IntVar(&c.Pool.Max, "pool-max", c.Pool.Max, "most ready sandboxes per warm image/language")
	fs.Int64Var(&f.poolMemoryMiB, "pool-memory-mib", c.Pool.MemoryBudget>>20, "memory budget of all ready pool sandboxes, in MiB")
	fs.DurationVar(&c.Pool.MaxAge, "pool-max-age", c.Pool.MaxAge, "pool sandboxes older than this are replaced")
	fs.StringVar(&f.warm, "warm", "python-ds/python,base/bash,base/node,base/sql", "image/language pairs readied at start (comma-separated; empty for none)")
	fs.StringVar(&c.DebugListen, "debug-listen", c.DebugListen, "serve Go's pprof profiles on this address (e.g. 127.0.0.1:6060); beyond loopback only with --metrics-key, which they then require; off when empty")
	fs.BoolVar(&c.NoSnapshots, "no-snapshots", c.NoSnapshots, "never restore from base snapshots (every sandbox boots)")
	fs.BoolVar(&c.Namespaces, "namespaces", envOr("AIRLOCK_NAMESPACES", "") == "1", "also offer the namespaces backend (isolation \"container\", first-party tenants only) (env AIRLOCK_NAMESPACES=1)")
	fs.StringVar(&c.CgroupParent, "cgroup-parent", c.CgroupParent, "host cgroup that holds every sandbox's cgroup (the reconciler owns all of it)")
	fs.BoolVar(&c.MicroVM, "microvm", envOr("AIRLOCK_MICROVM", "") == "1", "also offer the microVM backend (isolation \"vm\": QEMU microvm guests, KVM when it works, else TCG) (env AIRLOCK_MICROVM=1)")

	fs.StringVar(&c.Blobs.URL, "blobs", envOr("AIRLOCK_BLOBS", ""),
		"where artifacts and sealed snapshots are stored: empty for the state directory's blobs/, or an S3-compatible bucket "+
			"s3://BUCKET?endpoint=URL&region=R&use_path_style=true[&prefix=DIR/] (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "+
			"never in the URL; the bucket must exist) (env AIRLOCK_BLOBS)")
	fs.StringVar(&c.Blobs.SigningKeyFile, "signing-key-file", envOr("AIRLOCK_SIGNING_KEY_FILE", ""),
		"file holding the key that signs artifact URLs (at least 32 bytes, mode 0600); every node of a fleet must be given the same one "+
			"so a URL signed by one node works on all (default: signing.key in the state directory, made at first start) (env AIRLOCK_SIGNING_KEY_FILE)")
	fs.StringVar(&c.Trace.OTLPEndpoint, "otlp-endpoint", envOr("AIRLOCK_OTLP_ENDPOINT", ""),
		"export OpenTelemetry traces over OTLP/HTTP to this receiver, http(s)://HOST:PORT[/path] (default path /v1/traces; "+
			"OTEL_EXPORTER_OTLP_HEADERS adds headers); off when empty (env AIRLOCK_OTLP_ENDPOINT)")
	fs.StringVar(&c.Trace.Node, "node-name", envOr("AIRLOCK_NODE_NAME", ""),
		"this node's name in traces (service.instance.id; default the host name) (env AIRLOCK_NODE_NAME)")
	// The default is not taken from the environment here, so that -help
	// never prints a URL that may hold a password.
	fs.StringVar(&c.Store.URL, "store", "", `metadata store: "sqlite" (the default: <state-dir>/airlock.db, one node) or a PostgreSQL URL, postgres://user@host:5432/db?sslmode=verify-full (shared records; a password is better in PGPASSWORD or ~/.pgpass than in the URL) (env AIRLOCK_STORE)`)
	fs.BoolVar(&c.E2B.Enabled, "e2b", true, "serve the E2B-compatible API (for E2B's SDKs with E2B_API_URL and E2B_SANDBOX_URL set to this server) on --listen")
	fs.StringVar(&c.E2B.Listen, "e2b-listen", c.E2B.Listen, "also serve the E2B-compatible API alone on this address (e.g. 127.0.0.1:3000); off when empty")
	fs.Var(templateFlag(c.E2B.Templates), "e2b-template", "E2B template name to image, NAME=IMAGE (repeatable; defaults code-interpreter-v1=python-ds, code-interpreter=python-ds, base=base)")
	fs.Func("quota", "default quota of every tenant, KEY=VALUE (repeatable); keys: sessions, runs, executions_per_minute, vcpu, memory, sandbox_seconds_per_day, egress_bytes_per_day; VALUE a number (vcpu may be 0.5; memory and egress take KiB/MiB/GiB; seconds take 8h) or unlimited. 'airlock tenant set NAME --quota KEY=VALUE' overrides one for a tenant", func(v string) error {
		k, n, err := quota.ParseAssignment(v)
		if err != nil {
			return err
		}
		c.Quotas.Defaults[k] = n
		return nil
	})
	fs.DurationVar(&c.Quotas.Flush, "quota-flush", c.Quotas.Flush, "how often the day's quota counters are written to the store (and, in a fleet, read back) and tenants' overrides read again: what a crash may lose of the daily counts, and how late one node sees another's (default 10s; 2s in a fleet)")
}

// registerSessions registers the session flags.
func (f *flags) registerSessions(fs *flag.FlagSet) {
	c := &f.cfg
	fs.Var(sizeFlag(c.Sessions.Sizes), "session-size", "limits of a session size, NAME=CPUS,MEMORY_MIB,DISK_MB (small, medium, large; repeatable; defaults 1,1024,2147 / 2,2048,5368 / 4,4096,10737)")
	fs.DurationVar(&c.Sessions.Timeout, "session-timeout", c.Sessions.Timeout, "session lifetime when a request names none")
	fs.DurationVar(&c.Sessions.MaxLifetime, "session-max-lifetime", c.Sessions.MaxLifetime, "most any session may live from its creation, extensions included")
	fs.DurationVar(&c.Sessions.IdleTimeout, "session-idle-timeout", c.Sessions.IdleTimeout, "a session nothing ran in for this long is destroyed (a request may ask for another value)")
	fs.DurationVar(&c.Sessions.ExecTimeout, "session-exec-timeout", c.Sessions.ExecTimeout, "wall time of a session exec or cell when the request names none")
	fs.DurationVar(&c.Sessions.MaxExecTimeout, "session-max-exec-timeout", c.Sessions.MaxExecTimeout, "longest wall time a session exec or cell may ask for")
	fs.IntVar(&c.Sessions.Max, "max-sessions", c.Sessions.Max, "live sessions on this node")
	fs.IntVar(&c.Sessions.MaxPerTenant, "max-sessions-per-tenant", c.Sessions.MaxPerTenant, "live sessions of one tenant: the default of the sessions quota unless --quota sessions=N names one")
	fs.StringVar(&f.warmSessions, "warm-sessions", "python-ds/small", "image/size pairs whose sessions are readied ahead (base snapshot, pool members), comma-separated; empty for none")
}

// registerEgress registers the network flags.
func (f *flags) registerEgress(fs *flag.FlagSet) {
	c := &f.cfg
	fs.BoolVar(&c.Egress.Disabled, "no-egress", false, "run no egress proxy: sandboxes never get a network (allow_list sessions and allow_network are refused)")
	fs.StringVar(&c.Egress.Prefix, "egress-prefix", c.Egress.Prefix, "names of this node's sandbox namespaces, links and nftables tables (1 to 6 lower-case letters and digits; default from the state directory, so two airlockds on one host never touch each other's)")
	fs.StringVar(&c.Egress.Subnet, "egress-subnet", c.Egress.Subnet, "IPv4 range the sandboxes' links are carved from (a /30 each); must not overlap a network the host uses (default a /22 of 10.231.0.0/16 chosen by the state directory)")
	fs.IntVar(&c.Egress.ProxyPort, "egress-proxy-port", c.Egress.ProxyPort, "port of the egress proxy every sandbox TCP connection is redirected to (0: any free port)")
	fs.IntVar(&c.Egress.DNSPort, "egress-dns-port", c.Egress.DNSPort, "port of the sandbox resolver (UDP and TCP; 0: any free port)")
	fs.StringVar(&f.upstreams, "egress-upstream-dns", "", "DNS servers (host:port, comma-separated) the node resolves sandbox names with (default: the nameservers of /etc/resolv.conf)")
	fs.StringVar(&f.permit, "egress-permit", "", "address ranges (CIDR, comma-separated) exempt from the forbidden ranges, e.g. a trusted corporate network; loopback, link-local and metadata are never permitted")
	fs.Int64Var(&c.Egress.QuotaMiB, "egress-quota-mib", c.Egress.QuotaMiB, "bytes (in MiB) one sandbox may move through the proxy, up and down together (-1: unlimited)")
	fs.Var(allowFlag(c.Egress.Allow), "network-allow", "default allow list of a tenant for /v1/execute with allow_network: TENANT=host[:port],... (repeatable; TENANT * for every tenant without its own)")
	fs.StringVar(&c.Egress.BrokerConfig, "broker-config", c.Egress.BrokerConfig, "credential broker scopes (JSON file, see README); none when empty")
}

// registerAPI registers the HTTP API's flags.
func (f *flags) registerAPI(fs *flag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&c.API.PublicURL, "public-url", c.API.PublicURL, "absolute http(s) URL clients reach the API by, with an optional base path (e.g. https://airlock.example.com/base); artifact URLs are built from it instead of the request's Host (env AIRLOCK_PUBLIC_URL)")
	// The key's default is not taken from the environment here, so that
	// -help never prints it.
	fs.StringVar(&c.API.MetricsKey, "metrics-key", c.API.MetricsKey, "bearer key GET /metrics requires; without one, /metrics is open only when --listen is a loopback address (env AIRLOCK_METRICS_KEY)")
}

// registerAbuse registers the abuse monitor's flags.
func (f *flags) registerAbuse(fs *flag.FlagSet) {
	c := &f.cfg
	fs.BoolVar(&c.Abuse.Off, "no-abuse", c.Abuse.Off, "run no abuse detectors")
	fs.StringVar(&c.Abuse.Response, "abuse-response", c.Abuse.Response, "what a detection does: kill (the sandbox), quarantine (kill, and refuse the tenant new runs and sessions until `airlock tenant unquarantine`) or record")
	fs.StringVar(&f.abusePools, "abuse-pools", "", "mining pool domains added to the built-in list (comma-separated)")
	fs.StringVar(&f.abuseDisable, "abuse-disable", "", "detectors that do not run (comma-separated: mining, scanning, fork-bomb, dns-tunnel)")
	fs.DurationVar(&c.Abuse.Interval, "abuse-interval", c.Abuse.Interval, "how often each sandbox's cgroup statistics are read")
	fs.DurationVar(&c.Abuse.MiningWin, "abuse-mining-window", c.Abuse.MiningWin, "mining: how long the CPU stays busy with no output")
	fs.Float64Var(&c.Abuse.CPUFraction, "abuse-cpu-fraction", c.Abuse.CPUFraction, "mining: share of the sandbox's CPU quota that counts as busy")
	fs.DurationVar(&c.Abuse.ScanWin, "abuse-scan-window", c.Abuse.ScanWin, "scanning: the window the refused destinations are counted in")
	fs.IntVar(&c.Abuse.ScanDistict, "abuse-scan-distinct", c.Abuse.ScanDistict, "scanning: distinct destinations refused within the window")
	fs.DurationVar(&c.Abuse.ForkWin, "abuse-fork-window", c.Abuse.ForkWin, "fork bombs: the window")
	fs.IntVar(&c.Abuse.ForkHits, "abuse-fork-hits", c.Abuse.ForkHits, "fork bombs: samples within the window that see forks refused at the limit")
	fs.Float64Var(&c.Abuse.ForkBurst, "abuse-fork-burst", c.Abuse.ForkBurst, "fork bombs: growth of the sandbox's tasks within the window, as a share of its process limit")
	fs.DurationVar(&c.Abuse.DNSWin, "abuse-dns-window", c.Abuse.DNSWin, "DNS tunnelling: the window")
	fs.IntVar(&c.Abuse.DNSFlagged, "abuse-dns-flagged", c.Abuse.DNSFlagged, "DNS tunnelling: queries the resolver flagged within the window")
}

// registerKeep registers the flags of snapshots, pause and fork.
func (f *flags) registerKeep(fs *flag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&c.Keep.MasterKeyFile, "master-key-file", envOr("AIRLOCK_MASTER_KEY_FILE", ""),
		"file holding the operator's master key (32 bytes as 64 hex digits or base64, mode 0600) that wraps every tenant's snapshot data key; "+
			"env AIRLOCK_MASTER_KEY_FILE, or the key itself in env AIRLOCK_MASTER_KEY. Without one, snapshots, pause and fork are off")
	fs.StringVar(&f.oldMasterKey, "old-master-key-file", "",
		"comma-separated files of earlier master keys that still unwrap data keys not yet rotated (see 'airlock master-key rotate')")
	fs.Int64Var(&c.Keep.SnapshotQuotaMiB, "snapshot-quota-mib", c.Keep.SnapshotQuotaMiB, "sealed snapshot data one tenant may keep, in MiB")
	fs.DurationVar(&c.Keep.MaxPausedAge, "max-paused-age", c.Keep.MaxPausedAge, "a session paused for longer is ended and its saved state removed")
}

// registerFleet registers the flags of a node of a fleet.
func (f *flags) registerFleet(fs *flag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&f.etcd, "etcd", envOr("AIRLOCK_ETCD", ""), "etcd client URLs, comma-separated: run this node as part of a fleet (membership, placement, forwarding); empty for a single node (env AIRLOCK_ETCD)")
	fs.StringVar(&c.Fleet.NodeID, "node-id", envOr("AIRLOCK_NODE_ID", ""), "this node's name in the fleet, the same across restarts (default: the host name) (env AIRLOCK_NODE_ID)")
	fs.StringVar(&c.Fleet.Advertise, "advertise", c.Fleet.Advertise, "base URL other nodes forward to, http://host:port (default: http:// and the --listen address)")
	fs.StringVar(&c.Fleet.Secret, "fleet-secret", c.Fleet.Secret, "secret every node of the fleet shares, marking requests one node forwards to another; at least 16 bytes (env AIRLOCK_FLEET_SECRET)")
	fs.DurationVar(&c.Fleet.LeaseTTL, "fleet-lease-ttl", c.Fleet.LeaseTTL, "how long a node that stopped renewing its etcd lease stays a member; its sessions are marked lost after it")
	fs.IntVar(&c.Fleet.K, "fleet-k", c.Fleet.K, "live nodes a placement samples (best of K)")
	fs.Float64Var(&c.Fleet.CPUs, "fleet-cpus", c.Fleet.CPUs, "CPUs this node offers to placements (default: the machine's)")
	fs.Int64Var(&c.Fleet.MemoryMiB, "fleet-memory-mib", c.Fleet.MemoryMiB, "memory in MiB this node offers to placements (default: the machine's)")
	fs.StringVar(&c.Fleet.Prefix, "fleet-prefix", c.Fleet.Prefix, "etcd key prefix of the fleet (ends in /)")
}
