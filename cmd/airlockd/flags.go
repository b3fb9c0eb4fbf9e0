package main

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/seal"
	"github.com/airlockhq/airlock/node"
	"github.com/airlockhq/airlock/service/quota"
	"github.com/airlockhq/airlock/service/session"
)

// flags are airlockd's settings: every option binds to a field of a
// node.Config or to one of the few values config turns into one. They
// are registered once, in newFlags; settings.go fills them from the
// config file, the environment and the command line.
type flags struct {
	opts options
	cfg  node.Config

	configFile    string
	logLevel      string
	logFormat     string
	poolMemoryMiB int64
	masterKey     string
	// abuseDisable is the deprecated --abuse-disable: detectors taken
	// off --abuse-detectors.
	abuseDisable []string
	detectors    []string
	abuseOn      bool
	egressOn     bool
	baseSnaps    bool
	webhookRetry []string
}

// newFlags registers every option of airlockd with node.Defaults as the
// defaults.
func newFlags() *flags {
	f := &flags{cfg: node.Defaults(), logLevel: "info", logFormat: "text"}
	f.cfg.BuildImages = true // airlockd builds what is missing; a node made by a test does not
	f.cfg.Store.URL = "sqlite"
	f.abuseOn = !f.cfg.Abuse.Off
	f.egressOn = !f.cfg.Egress.Disabled
	f.baseSnaps = !f.cfg.NoSnapshots
	f.registerAPI()
	f.registerState()
	f.registerBackends()
	f.registerPool()
	f.registerLimits()
	f.registerSessions()
	f.registerNetwork()
	f.registerKeep()
	f.registerAbuse()
	f.registerFleet()
	f.registerObservability()
	return f
}

// config is the node.Config the options say, checked.
func (f *flags) config() (node.Config, error) {
	c := f.cfg
	if c.Store.URL == "" {
		c.Store.URL = "sqlite"
	}
	c.Trace.Node = c.Fleet.NodeID
	if len(c.Fleet.Etcd) == 0 {
		c.Fleet.EtcdPassword = ""
	}
	c.Pool.MemoryBudget = f.poolMemoryMiB << 20
	c.Pool.Disabled = c.Pool.Max == 0
	c.Abuse.Off = !f.abuseOn
	c.Egress.Disabled = !f.egressOn
	c.NoSnapshots = !f.baseSnaps
	c.Abuse.Disable = nil
	for _, d := range airlock.Detectors {
		if !slices.Contains(f.detectors, d) || slices.Contains(f.abuseDisable, d) {
			c.Abuse.Disable = append(c.Abuse.Disable, d)
		}
	}
	for _, d := range append(slices.Clone(f.detectors), f.abuseDisable...) {
		if !slices.Contains(airlock.Detectors, d) {
			return c, fmt.Errorf("--abuse-detectors: unknown detector %q (want some of %s)", d, strings.Join(airlock.Detectors, ", "))
		}
	}
	if f.masterKey != "" {
		if c.Keep.MasterKeyFile != "" {
			return c, fmt.Errorf("--master-key and --master-key-file: give the master key one way, not both")
		}
		k, err := seal.ParseMasterKey(f.masterKey)
		if err != nil {
			return c, fmt.Errorf("--master-key: %w", err)
		}
		c.Keep.MasterKey = k
	}
	c.Webhooks.RetrySchedule = nil
	for _, s := range f.webhookRetry {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d <= 0 {
			return c, fmt.Errorf("--webhook-retry-schedule: %q is not a positive duration", s)
		}
		c.Webhooks.RetrySchedule = append(c.Webhooks.RetrySchedule, d)
	}
	if c.Webhooks.Horizon <= 0 || c.Webhooks.MaxPerTenant <= 0 || c.Webhooks.EventsRetention <= 0 {
		return c, fmt.Errorf("--webhook-retry-for, --webhook-max-per-tenant and --events-retention must be positive")
	}
	if f.logFormat != "text" && f.logFormat != "json" {
		return c, fmt.Errorf("--log-format: want text or json, not %q", f.logFormat)
	}
	if _, err := parseLevel(f.logLevel); err != nil {
		return c, fmt.Errorf("--log-level: %w", err)
	}
	return c, c.Validate()
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
	return strings.Join(out, " ")
}

func (f templateFlag) Set(v string) error {
	name, img, ok := strings.Cut(v, "=")
	if !ok || name == "" || img == "" {
		return fmt.Errorf("want NAME=IMAGE")
	}
	f[name] = img
	return nil
}

// registryFlag collects --insecure-registry HOST:PORT.
type registryFlag []string

func (f *registryFlag) String() string { return strings.Join(*f, " ") }

func (f *registryFlag) Set(v string) error {
	if v == "" || strings.ContainsAny(v, "/ ") || !strings.Contains(v, ":") {
		return fmt.Errorf("want HOST:PORT")
	}
	*f = append(*f, v)
	return nil
}

// quotaFlag collects --quota KEY=VALUE.
type quotaFlag quota.Limits

func (f quotaFlag) String() string { return quota.Limits(f).String() }

func (f quotaFlag) Set(v string) error {
	k, n, err := quota.ParseAssignment(v)
	if err != nil {
		return err
	}
	f[k] = n
	return nil
}

// sizeFlag collects --session-size-mib NAME=CPUS,MEMORY_MIB,DISK_MIB;
// the deprecated --session-size took its disk in MB (diskUnit 1e6).
type sizeFlag struct {
	m        map[airlock.SessionSize]session.Size
	diskUnit int64
	diskName string
}

func (f sizeFlag) String() string {
	var out []string
	for k, v := range f.m {
		out = append(out, fmt.Sprintf("%s=%g,%d,%d", k, v.CPUs, v.MemoryBytes>>20, v.DiskBytes/f.diskUnit))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func (f sizeFlag) Set(v string) error {
	name, spec, ok := strings.Cut(v, "=")
	parts := strings.Split(spec, ",")
	if !ok || len(parts) != 3 || !airlock.SessionSize(name).Valid() {
		return fmt.Errorf("want NAME=CPUS,MEMORY_MIB,%s with NAME small, medium or large", f.diskName)
	}
	cpus, err1 := strconv.ParseFloat(parts[0], 64)
	mem, err2 := strconv.ParseInt(parts[1], 10, 64)
	disk, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || cpus <= 0 || mem <= 0 || disk <= 0 {
		return fmt.Errorf("CPUS, MEMORY_MIB and %s must be positive numbers", f.diskName)
	}
	pids := session.DefaultSizes[airlock.SessionSize(name)].Pids
	f.m[airlock.SessionSize(name)] = session.Size{CPUs: cpus, MemoryBytes: mem << 20, DiskBytes: disk * f.diskUnit, Pids: pids}
	return nil
}

// redactURL shows a URL without its password.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		if scheme, _, ok := strings.Cut(s, "://"); ok {
			return scheme + "://<redacted>"
		}
		return s
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "redacted")
	}
	return u.String()
}

func (f *flags) registerAPI() {
	c, r := &f.cfg, &f.opts
	r.str(&c.Listen, "listen", groupAPI, "address to serve the API on")
	r.str(&c.API.PublicURL, "public-url", groupAPI, "absolute http(s) URL clients reach the API by, with an optional base path (e.g. https://airlock.example.com/base); artifact URLs are built from it instead of the request's Host")
	r.boolean(&c.E2B.Enabled, "e2b", groupAPI, "serve the E2B-compatible API (for E2B's SDKs with E2B_API_URL and E2B_SANDBOX_URL set to this server) on --listen")
	r.str(&c.E2B.Listen, "e2b-listen", groupAPI, "also serve the E2B-compatible API alone on this address (e.g. 127.0.0.1:3000); off when empty")
	r.repeat(templateFlag(c.E2B.Templates), "e2b-template", groupAPI, "E2B template name to image, NAME=IMAGE (repeatable; defaults code-interpreter-v1=python-ds, code-interpreter=python-ds, base=base)")
	r.str(&c.Preview.Domain, "preview-domain", groupAPI, "serve preview URLs by Host as {port}-{session_id}.DOMAIN (a wildcard DNS name pointing at this server); off when empty, when /v1/sessions/{id}/ports/{port}/ still works")
	r.integer(&c.Preview.MaxConns, "preview-max-conns", groupAPI, "preview requests (and WebSockets) open at once to one session; past it 429")
	r.int64(&c.Preview.MaxMiB, "preview-max-mib", "MiB", groupAPI, "MiB one session's previews may carry, both ways, over its life; past it 429 (0: no limit)")
	r.str(&c.DebugListen, "debug-listen", groupAPI, "serve Go's pprof profiles on this address (e.g. 127.0.0.1:6060); beyond loopback only with --metrics-key, which they then require; off when empty")
}

func (f *flags) registerState() {
	c, r := &f.cfg, &f.opts
	r.str(&f.configFile, "config", groupState, "TOML file of settings, one key per option (e.g. max-concurrent = 4); flags and the environment win over it")
	r.str(&c.StateDir, "state-dir", groupState, "state directory: database, blobs, images, sandboxes, key files")
	o := r.str(&c.Store.URL, "store", groupState, `metadata store: "sqlite" (<state-dir>/airlock.db, one node) or a PostgreSQL URL, postgres://user@host:5432/db?sslmode=verify-full (shared records; a password is better in PGPASSWORD or ~/.pgpass than in the URL)`)
	o.secret, o.redact = true, redactURL
	r.str(&c.Blobs.URL, "blobs", groupState,
		"where artifacts and sealed snapshots are stored: empty for the state directory's blobs/, or an S3-compatible bucket "+
			"s3://BUCKET?endpoint=URL&region=R&use_path_style=true[&prefix=DIR/] (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "+
			"never in the URL; the bucket must exist)")
	r.str(&c.Blobs.SigningKeyFile, "signing-key-file", groupState,
		"file holding the key that signs artifact URLs (at least 32 bytes, mode 0600); every node of a fleet must be given the same one "+
			"so a URL signed by one node works on all (default: signing.key in the state directory, made at first start)")
	r.duration(&c.ImageGC, "image-gc-interval", groupState, "how often unreferenced image versions, template leftovers and unused layers are removed (also at start; 0: never, see airlock node image prune)")
	r.repeat((*registryFlag)(&c.Templates.InsecureRegistries), "insecure-registry", groupState, "registry (HOST:PORT) that templates may be pulled from over plain HTTP (repeatable); every other registry is HTTPS only")
	r.str(&c.Templates.RegistryAuthFile, "registry-auth-file", groupState, `file of the node's registry credentials for template imports, Docker config.json style ({"auths": {"HOST:PORT": {"auth": base64 of "user:password"}}}); used when a request brings none, never stored in a template`)
	r.int64(&c.Templates.QuotaBytes, "template-quota-bytes", "bytes", groupState, "storage quota of one tenant's templates together (0: 10 GiB; negative: none)")
	r.boolean(&c.KeepSessions, "keep-sessions", groupState, "on SIGTERM or SIGINT, leave live sessions running for the next start to reattach (false: end them)")
}

func (f *flags) registerBackends() {
	c, r := &f.cfg, &f.opts
	r.str(&c.AgentPath, "agent", groupBackends, "airlock-agent binary the images must carry (default: next to airlockd, if present)")
	r.boolean(&c.BuildImages, "build-images", groupBackends, "once serving, build in the background each shipped image (base, python-ds) not built for the agent; "+
		"until python-ds is built, Python runs that name no image and import nothing of it run on base, and what needs it answers 503 image-building")
	r.boolean(&c.Namespaces, "namespaces", groupBackends, "also offer the namespaces backend (isolation \"container\", first-party tenants only)")
	r.boolean(&c.MicroVM, "microvm", groupBackends, "also offer the microVM backend (isolation \"vm\": QEMU microvm guests, KVM when it works, else TCG)")
	r.str(&c.CgroupParent, "cgroup-parent", groupBackends, "host cgroup that holds every sandbox's cgroup (the reconciler owns all of it)")
	r.boolean(&f.baseSnaps, "base-snapshots", groupBackends, "restore sandboxes from their image's base snapshot (false: every sandbox boots)")
	r.alias("no-snapshots", "use --base-snapshots=false", kindBool, invertedBool{&f.baseSnaps}, groupBackends)
}

func (f *flags) registerPool() {
	c, r := &f.cfg, &f.opts
	r.integer(&c.Pool.Min, "pool-min", groupPool, "ready sandboxes kept per warm image/language even when idle")
	r.integer(&c.Pool.Max, "pool-max", groupPool, "most ready sandboxes per warm image/language (0: no pool)")
	f.poolMemoryMiB = c.Pool.MemoryBudget >> 20
	r.int64(&f.poolMemoryMiB, "pool-memory-mib", "MiB", groupPool, "memory budget of all ready pool sandboxes")
	r.duration(&c.Pool.MaxAge, "pool-max-age", groupPool, "pool sandboxes older than this are replaced")
	r.integer(&c.Pool.TemplateMax, "template-pool-max", groupPool, "most ready sandboxes per template (its pool grows from zero with the template's own arrival rate)")
	r.duration(&c.Pool.TemplateIdle, "template-pool-idle", groupPool, "a template not asked for this long holds no ready sandbox")
	r.strings(&c.Warm, "warm", groupPool, "image/language pairs readied at start (comma-separated; empty for none)")
	r.strings(&c.Sessions.Warm, "warm-sessions", groupPool, "image/size pairs whose sessions are readied ahead (base snapshot, pool members), comma-separated; empty for none")
}

func (f *flags) registerLimits() {
	c, r := &f.cfg, &f.opts
	r.duration(&c.MaxTimeout, "max-timeout", groupLimits, "longest wall time a request may ask for")
	r.duration(&c.DefaultTimeout, "default-timeout", groupLimits, "wall time when a request names none")
	r.integer(&c.MaxConcurrent, "max-concurrent", groupLimits, "one-shot executions running at once on this node")
	r.float(&c.TenantShare, "tenant-share", "", groupLimits, "share of the one-shot slots (--max-concurrent) one tenant may hold or wait for at once; past it a request gets a 429 at once")
	r.integer(&c.MaxQueue, "max-queue", groupLimits, "one-shot executions that may wait for a slot (0: 4 x --max-concurrent); past it a request gets a 503 node-busy problem with Retry-After at once")
	r.integer(&c.MaxStarts, "max-starts", groupLimits, "sandboxes being made at once, restores and boots, pool fills included (0: the number of CPUs); a request that misses the pool beyond it waits for the next ready sandbox")
	r.int64(&c.MemoryMiB, "memory-mib", "MiB", groupLimits, "memory limit of a one-shot sandbox")
	r.repeat(quotaFlag(c.Quotas.Defaults), "quota", groupLimits, "default quota of every tenant, KEY=VALUE (repeatable); keys: sessions, runs, executions_per_minute, vcpu, memory, sandbox_seconds_per_day, egress_bytes_per_day, volume_bytes; VALUE a number (vcpu may be 0.5; memory, egress and volume_bytes take KiB/MiB/GiB; seconds take 8h) or unlimited. 'airlock admin tenant set NAME --quota KEY=VALUE' overrides one for a tenant")
	r.duration(&c.Quotas.Flush, "quota-flush", groupLimits, "how often the day's quota counters are written to the store (and, in a fleet, read back) and tenants' overrides read again: what a crash may lose of the daily counts, and how late one node sees another's (0: 10s; 2s in a fleet)")
}

func (f *flags) registerSessions() {
	c, r := &f.cfg, &f.opts
	r.repeat(sizeFlag{c.Sessions.Sizes, 1 << 20, "DISK_MIB"}, "session-size-mib", groupSessions, "limits of a session size, NAME=CPUS,MEMORY_MIB,DISK_MIB (small, medium, large; repeatable; defaults small=1,1024,2048 medium=2,2048,5120 large=4,4096,10240)")
	r.alias("session-size", "use --session-size-mib, whose disk is in MiB (this one's is in MB)", kindRepeat, sizeFlag{c.Sessions.Sizes, 1000 * 1000, "DISK_MB"}, groupSessions)
	r.duration(&c.Sessions.Timeout, "session-timeout", groupSessions, "session lifetime when a request names none")
	r.duration(&c.Sessions.MaxLifetime, "session-max-lifetime", groupSessions, "most any session may live from its creation, extensions included")
	r.duration(&c.Sessions.IdleTimeout, "session-idle-timeout", groupSessions, "a session nothing ran in for this long is destroyed (a request may ask for another value)")
	r.duration(&c.Sessions.ExecTimeout, "session-exec-timeout", groupSessions, "wall time of a session exec or cell when the request names none")
	r.duration(&c.Sessions.MaxExecTimeout, "session-max-exec-timeout", groupSessions, "longest wall time a session exec or cell may ask for")
	r.duration(&c.Sessions.SampleInterval, "session-sample-interval", groupSessions, "how often each running session's CPU, memory, disk and network are sampled (GET /v1/sessions/{id}/metrics; samples are kept a day after the session ends)")
	r.integer(&c.Sessions.Max, "max-sessions", groupSessions, "live sessions on this node")
	r.integer(&c.Sessions.MaxPerTenant, "max-sessions-per-tenant", groupSessions, "live sessions of one tenant: the default of the sessions quota unless --quota sessions=N names one")
}

func (f *flags) registerNetwork() {
	c, r := &f.cfg, &f.opts
	r.boolean(&f.egressOn, "egress", groupNetwork, "run the egress proxy (false: sandboxes never get a network; allow_list sessions and allow_network are refused)")
	r.alias("no-egress", "use --egress=false", kindBool, invertedBool{&f.egressOn}, groupNetwork)
	r.str(&c.Egress.Prefix, "egress-prefix", groupNetwork, "names of this node's sandbox namespaces, links and nftables tables (1 to 6 lower-case letters and digits; default from the state directory, so two airlockds on one host never touch each other's)")
	r.str(&c.Egress.Subnet, "egress-subnet", groupNetwork, "IPv4 range the sandboxes' links are carved from (a /30 each); must not overlap a network the host uses (default a /22 of 10.231.0.0/16 chosen by the state directory)")
	r.integer(&c.Egress.ProxyPort, "egress-proxy-port", groupNetwork, "port of the egress proxy every sandbox TCP connection is redirected to (0: any free port)")
	r.integer(&c.Egress.DNSPort, "egress-dns-port", groupNetwork, "port of the sandbox resolver (UDP and TCP; 0: any free port)")
	r.strings(&c.Egress.Upstreams, "egress-upstream-dns", groupNetwork, "DNS servers (host:port, comma-separated) the node resolves sandbox names with (default: the nameservers of /etc/resolv.conf)")
	r.strings(&c.Egress.Permit, "egress-permit", groupNetwork, "address ranges (CIDR, comma-separated) exempt from the forbidden ranges, e.g. a trusted corporate network; loopback, link-local and metadata are never permitted")
	r.int64(&c.Egress.QuotaMiB, "egress-quota-mib", "MiB", groupNetwork, "data one sandbox may move through the proxy, up and down together (-1: unlimited)")
	r.repeat(allowFlag(c.Egress.Allow), "network-allow", groupNetwork, "default allow list of a tenant for /v1/execute with allow_network: TENANT=host[:port],... (repeatable; TENANT * for every tenant without its own)")
	r.str(&c.Egress.BrokerConfig, "broker-config", groupNetwork, "credential broker scopes (JSON file); none when empty")
}

func (f *flags) registerKeep() {
	c, r := &f.cfg, &f.opts
	r.str(&c.Keep.MasterKeyFile, "master-key-file", groupKeep,
		"file holding the operator's master key (32 bytes as 64 hex digits or base64, mode 0600) that wraps every tenant's snapshot data key")
	o := r.str(&f.masterKey, "master-key", groupKeep, "the master key itself (64 hex digits or base64), instead of --master-key-file; best given in the environment")
	o.secret = true
	r.boolean(&c.Keep.Generate, "master-key-generate", groupKeep, "on a single node (SQLite store, no fleet) given no master key, use <state-dir>/master.key, made at first start (false: without a master key, snapshots, pause and fork are off)")
	r.strings(&c.Keep.OldMasterKeyFiles, "old-master-key-file", groupKeep, "comma-separated files of earlier master keys that still unwrap data keys not yet rotated (see 'airlock node master-key rotate')")
	r.int64(&c.Keep.SnapshotQuotaMiB, "snapshot-quota-mib", "MiB", groupKeep, "sealed snapshot data one tenant may keep")
	r.duration(&c.Keep.MaxPausedAge, "max-paused-age", groupKeep, "a session paused for longer is ended and its saved state removed")
	r.int64(&c.Keep.PausedQuotaMiB, "paused-quota-mib", "MiB", groupKeep, "disk one tenant's paused sessions may hold; a pause that goes over ends its session (end reason paused_quota; 0: no quota)")
	r.boolean(&c.Webhooks.AllowPrivate, "webhook-allow-private", groupKeep, "let webhook deliveries reach private, loopback and link-local addresses (never the metadata address); by default only public addresses")
	r.integer(&c.Webhooks.MaxPerTenant, "webhook-max-per-tenant", groupKeep, "webhooks one tenant may register")
	r.duration(&c.Webhooks.Horizon, "webhook-retry-for", groupKeep, "how long a webhook delivery is retried before it is given up (failed)")
	r.duration(&c.Webhooks.EventsRetention, "events-retention", groupKeep, "how long session events and webhook delivery records are kept before they are deleted (longer than --webhook-retry-for, or deliveries still being retried go with their events)")
	r.strings(&f.webhookRetry, "webhook-retry-schedule", groupKeep, "comma-separated waits after each failed webhook try, the last repeating (default 10s,30s,1m,5m,15m,30m,1h,2h,4h)")
}

func (f *flags) registerAbuse() {
	c, r := &f.cfg, &f.opts
	f.detectors = slices.Clone(airlock.Detectors)
	r.boolean(&f.abuseOn, "abuse", groupAbuse, "run the abuse detectors (false: none)")
	r.alias("no-abuse", "use --abuse=false", kindBool, invertedBool{&f.abuseOn}, groupAbuse)
	r.strings(&f.detectors, "abuse-detectors", groupAbuse, "detectors that run (comma-separated, some of mining, scanning, fork-bomb, dns-tunnel)")
	r.alias("abuse-disable", "use --abuse-detectors, which names those that run", kindList, (*listValue)(&f.abuseDisable), groupAbuse)
	r.str(&c.Abuse.Response, "abuse-response", groupAbuse, "what a detection does: kill (the sandbox), quarantine (kill, and refuse the tenant new runs and sessions until `airlock admin tenant set NAME --unquarantine`) or record")
	r.strings(&c.Abuse.Pools, "abuse-pools", groupAbuse, "mining pool domains added to the built-in list (comma-separated)")
	r.duration(&c.Abuse.Interval, "abuse-interval", groupAbuse, "how often each sandbox's cgroup statistics are read")
	r.duration(&c.Abuse.MiningWin, "abuse-mining-window", groupAbuse, "mining: how long the CPU stays busy with no output")
	r.float(&c.Abuse.CPUFraction, "abuse-cpu-fraction", "", groupAbuse, "mining: share of the sandbox's CPU quota that counts as busy")
	r.duration(&c.Abuse.ScanWin, "abuse-scan-window", groupAbuse, "scanning: the window the refused destinations are counted in")
	r.integer(&c.Abuse.ScanDistict, "abuse-scan-distinct", groupAbuse, "scanning: distinct destinations refused within the window")
	r.duration(&c.Abuse.ForkWin, "abuse-fork-window", groupAbuse, "fork bombs: the window")
	r.integer(&c.Abuse.ForkHits, "abuse-fork-hits", groupAbuse, "fork bombs: samples within the window that see forks refused at the limit")
	r.float(&c.Abuse.ForkBurst, "abuse-fork-burst", "", groupAbuse, "fork bombs: growth of the sandbox's tasks within the window, as a share of its process limit")
	r.duration(&c.Abuse.DNSWin, "abuse-dns-window", groupAbuse, "DNS tunnelling: the window")
	r.integer(&c.Abuse.DNSFlagged, "abuse-dns-flagged", groupAbuse, "DNS tunnelling: queries the resolver flagged within the window")
}

func (f *flags) registerFleet() {
	c, r := &f.cfg, &f.opts
	r.strings(&c.Fleet.Etcd, "etcd", groupFleet, "etcd client URLs, comma-separated: run this node as part of a fleet (membership, placement, forwarding); empty for a single node")
	r.str(&c.Fleet.NodeID, "node-id", groupFleet, "this node's name: in the fleet (the same across restarts) and in traces (service.instance.id) (default: the host name)")
	r.alias("node-name", "use --node-id", kindString, (*stringValue)(&c.Fleet.NodeID), groupFleet)
	r.str(&c.Fleet.Advertise, "advertise", groupFleet, "base URL other nodes forward to, http://host:port (default: http:// and the --listen address)")
	r.str(&c.Fleet.EtcdCA, "etcd-ca", groupFleet, "CA certificate (PEM) that verifies the etcd members (https:// endpoints; default the system's roots)")
	r.str(&c.Fleet.EtcdCert, "etcd-cert", groupFleet, "client certificate (PEM) for etcd members that require one, with --etcd-key")
	r.str(&c.Fleet.EtcdKey, "etcd-key", groupFleet, "key (PEM file) of --etcd-cert")
	r.str(&c.Fleet.EtcdUser, "etcd-user", groupFleet, "etcd user, for a cluster with auth enabled, with --etcd-password")
	o := r.str(&c.Fleet.EtcdPassword, "etcd-password", groupFleet, "password of --etcd-user; best given in the environment")
	o.secret = true
	r.strings(&c.Fleet.NodeRanges, "fleet-node-range", groupFleet, "address ranges (CIDR, comma-separated) the fleet's nodes are reached at; forwards go to no other address, and sandboxes' egress never reaches these (default loopback and the private ranges)")
	o = r.str(&c.Fleet.Secret, "fleet-secret", groupFleet, "secret every node of the fleet shares: the key of the HMAC each forwarded request is signed with (method, path, time, nonce, body); at least 16 bytes; best given in the environment")
	o.secret = true
	r.duration(&c.Fleet.LeaseTTL, "fleet-lease-ttl", groupFleet, "how long a node that stopped renewing its etcd lease stays a member; its sessions are marked lost after it")
	r.integer(&c.Fleet.K, "fleet-k", groupFleet, "live nodes a placement samples (best of K)")
	r.float(&c.Fleet.CPUs, "fleet-cpus", "CPUs", groupFleet, "CPUs the sessions placed on this node may reserve in all (0: no bound beyond --max-sessions, as a node alone); one-shot runs are bounded by --max-concurrent only")
	r.int64(&c.Fleet.MemoryMiB, "fleet-memory-mib", "MiB", groupFleet, "memory the sessions placed on this node may reserve in all (0: no bound beyond --max-sessions, as a node alone)")
	r.str(&c.Fleet.Prefix, "fleet-prefix", groupFleet, "etcd key prefix of the fleet (ends in /)")
}

func (f *flags) registerObservability() {
	c, r := &f.cfg, &f.opts
	r.str(&f.logLevel, "log-level", groupObservability, "debug, info, warn or error")
	r.str(&f.logFormat, "log-format", groupObservability, "text or json (one JSON object a line, log/slog's format)")
	o := r.str(&c.API.MetricsKey, "metrics-key", groupObservability, "bearer key GET /metrics requires; without one, /metrics is open only when --listen is a loopback address; best given in the environment")
	o.secret = true
	r.str(&c.Trace.OTLPEndpoint, "otlp-endpoint", groupObservability,
		"export OpenTelemetry traces over OTLP/HTTP to this receiver, http(s)://HOST:PORT[/path] (default path /v1/traces; "+
			"OTEL_EXPORTER_OTLP_HEADERS adds headers); off when empty")
}
