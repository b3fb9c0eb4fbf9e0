package quota

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Key names a quota.
type Key string

// The quotas.
const (
	// Sessions bounds the tenant's live sessions.
	Sessions Key = "sessions"
	// Runs bounds the tenant's one-shot runs at once (holding a sandbox or
	// waiting for a slot of the node).
	Runs Key = "runs"
	// ExecutionsPerMinute bounds what the tenant starts in any 60
	// seconds: one-shot runs, session execs and cells.
	ExecutionsPerMinute Key = "executions_per_minute"
	// VCPU bounds the sum of the vCPU limits of the tenant's live
	// sandboxes, in thousandths of a vCPU.
	VCPU Key = "vcpu"
	// Memory bounds the sum of their memory limits, in bytes.
	Memory Key = "memory"
	// SandboxSecondsPerDay bounds the wall time the tenant's sandboxes
	// exist in a UTC day, one-shot and session alike.
	SandboxSecondsPerDay Key = "sandbox_seconds_per_day"
	// EgressBytesPerDay bounds the bytes the tenant's sandboxes move
	// through the egress proxy in a UTC day, up and down together.
	EgressBytesPerDay Key = "egress_bytes_per_day"
	// VolumeBytes bounds the sum of the sizes of the tenant's volumes
	// (package volume checks it when a volume is made; it is stored, not
	// held by sandboxes, so the ledger shows no use of it).
	VolumeBytes Key = "volume_bytes"
)

// Unlimited is the limit of a quota that has none.
const Unlimited int64 = -1

// Windows over which a quota counts.
const (
	WindowConcurrent = "concurrent"
	WindowMinute     = "minute"
	WindowDay        = "day"
	WindowStored     = "stored" // what the tenant keeps (volume_bytes): counted by its owner, not the ledger
)

// def describes one quota.
type def struct {
	key     Key
	unit    string
	window  string
	problem string // the problem type of a refusal
	what    string // for messages: "live sessions"
	parse   func(string) (int64, error)
	format  func(int64) string
}

var defs = []def{
	{Sessions, "sessions", WindowConcurrent, "session-quota", "live sessions", parseCount, formatInt},
	{Runs, "runs", WindowConcurrent, "run-quota", "one-shot runs at once", parseCount, formatInt},
	{ExecutionsPerMinute, "executions", WindowMinute, "execution-rate-quota", "executions in a minute", parseCount, formatInt},
	{VCPU, "millivcpu", WindowConcurrent, "vcpu-quota", "vCPU in use", parseVCPU, formatVCPU},
	{Memory, "bytes", WindowConcurrent, "memory-quota", "bytes of memory in use", parseBytes, formatBytes},
	{SandboxSecondsPerDay, "seconds", WindowDay, "sandbox-time-quota", "sandbox-seconds today", parseSeconds, formatInt},
	{EgressBytesPerDay, "bytes", WindowDay, "egress-quota", "egress bytes today", parseBytes, formatBytes},
	{VolumeBytes, "bytes", WindowStored, "volume-quota", "bytes of volumes", parseBytes, formatBytes},
}

func lookup(k Key) (def, bool) {
	for _, d := range defs {
		if d.key == k {
			return d, true
		}
	}
	return def{}, false
}

// Keys returns every quota, in a stable order.
func Keys() []Key {
	out := make([]Key, len(defs))
	for i, d := range defs {
		out[i] = d.key
	}
	return out
}

// Valid says whether k names a quota.
func (k Key) Valid() bool { _, ok := lookup(k); return ok }

// Unit is what the quota's limit counts.
func (k Key) Unit() string { d, _ := lookup(k); return d.unit }

// Window is what the quota counts over.
func (k Key) Window() string { d, _ := lookup(k); return d.window }

// Problem is the problem type of a request refused by the quota.
func (k Key) Problem() string { d, _ := lookup(k); return d.problem }

// Format renders a limit or a use of the quota for people: "4" vCPU,
// "512MiB", "unlimited".
func (k Key) Format(v int64) string {
	d, ok := lookup(k)
	if v < 0 {
		return "unlimited"
	}
	if !ok {
		return formatInt(v)
	}
	return d.format(v)
}

// ParseValue reads a limit of the quota: "unlimited" (or -1), else a
// count, vCPU as a decimal ("2", "0.5") or thousandths ("500m"), bytes
// as a number with an optional unit (KiB, MiB, GiB, TiB; KB, MB, GB,
// TB), seconds as a number or a Go duration ("8h").
func (k Key) ParseValue(s string) (int64, error) {
	d, ok := lookup(k)
	if !ok {
		return 0, fmt.Errorf("unknown quota %q (want one of %s)", k, keyList())
	}
	s = strings.TrimSpace(s)
	if s == "unlimited" || s == "none" || s == "-1" {
		return Unlimited, nil
	}
	v, err := d.parse(s)
	if err != nil {
		return 0, fmt.Errorf("quota %s: %w", k, err)
	}
	return v, nil
}

func keyList() string {
	var names []string
	for _, d := range defs {
		names = append(names, string(d.key))
	}
	return strings.Join(names, ", ")
}

// ParseAssignment reads KEY=VALUE.
func ParseAssignment(s string) (Key, int64, error) {
	name, val, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return "", 0, fmt.Errorf("want KEY=VALUE with KEY one of %s", keyList())
	}
	k := Key(strings.TrimSpace(name))
	v, err := k.ParseValue(val)
	return k, v, err
}

// Limits are limits by quota; a quota not in it has none.
type Limits map[Key]int64

// Get returns the limit of k and whether it is set.
func (l Limits) Get(k Key) (int64, bool) {
	v, ok := l[k]
	return v, ok
}

// String renders the limits as KEY=VALUE pairs, in the quotas' order.
func (l Limits) String() string {
	var out []string
	for _, d := range defs {
		if v, ok := l[d.key]; ok {
			out = append(out, string(d.key)+"="+d.key.Format(v))
		}
	}
	return strings.Join(out, " ")
}

// Validate checks every key and value.
func (l Limits) Validate() error {
	var keys []string
	for k := range l {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	for _, name := range keys {
		k := Key(name)
		if !k.Valid() {
			return fmt.Errorf("unknown quota %q (want one of %s)", k, keyList())
		}
		if l[k] < Unlimited {
			return fmt.Errorf("quota %s: a limit is -1 (unlimited) or more", k)
		}
	}
	return nil
}

const maxLimit = math.MaxInt64 / 4 // far beyond any use, and no sum of them overflows

func parseCount(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > maxLimit {
		return 0, fmt.Errorf("%q is not a count (0 or more, or unlimited)", s)
	}
	return n, nil
}

func parseVCPU(s string) (int64, error) {
	if m, ok := strings.CutSuffix(s, "m"); ok {
		return parseCount(m)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsNaN(f) || f > float64(maxLimit/1000) {
		return 0, fmt.Errorf("%q is not a number of vCPU (e.g. 4, 0.5 or 500m)", s)
	}
	return int64(math.Round(f * 1000)), nil
}

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

func parseBytes(s string) (int64, error) {
	mult := int64(1)
	num := s
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsNaN(f) || f*float64(mult) > float64(maxLimit) {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s)
	}
	return int64(f * float64(mult)), nil
}

func parseSeconds(s string) (int64, error) {
	if n, err := parseCount(s); err == nil {
		return n, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a number of seconds or a duration (e.g. 3600 or 1h)", s)
	}
	return int64(d / time.Second), nil
}

func formatInt(v int64) string { return strconv.FormatInt(v, 10) }

func formatVCPU(v int64) string { return strconv.FormatFloat(float64(v)/1000, 'f', -1, 64) }

func formatBytes(v int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= u.mult && v%u.mult == 0 {
			return strconv.FormatInt(v/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(v, 10)
}
