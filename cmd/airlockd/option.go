package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// group is a heading of -h and of docs/configuration.md; options are
// shown under their group, groups in this order.
type group int

const (
	groupAPI group = iota
	groupState
	groupBackends
	groupPool
	groupLimits
	groupSessions
	groupNetwork
	groupKeep
	groupAbuse
	groupFleet
	groupObservability
	numGroups
)

var groupTitles = [numGroups]string{
	groupAPI:           "Listen and API",
	groupState:         "State and store",
	groupBackends:      "Backends and images",
	groupPool:          "Pool",
	groupLimits:        "Limits",
	groupSessions:      "Sessions",
	groupNetwork:       "Network",
	groupKeep:          "Snapshots, pause and fork",
	groupAbuse:         "Abuse detection",
	groupFleet:         "Fleet",
	groupObservability: "Observability",
}

// kind is the type of an option's value: it decides what a config file
// must write for it and how -h shows it.
type kind int

const (
	kindString kind = iota
	kindBool
	kindInt
	kindFloat
	kindDuration
	kindList   // comma-separated on the command line and in the environment; a TOML array or string
	kindRepeat // repeatable flag; whitespace-separated in the environment; a TOML array
)

var kindNames = map[kind]string{
	kindString: "string", kindBool: "bool", kindInt: "integer", kindFloat: "number",
	kindDuration: "duration", kindList: "list", kindRepeat: "repeatable",
}

// option is one setting of airlockd: one flag, one environment variable
// and one config file key, all named after it.
type option struct {
	name  string
	group group
	kind  kind
	usage string
	// unit of a number ("MiB", "CPUs"), shown in -h and the docs.
	unit string
	// secret values are never printed: config print redacts them, -h
	// never shows their value.
	secret bool
	// redact, for a secret that is partly shown (a URL with a password),
	// returns what may be printed; nil prints "<redacted>".
	redact func(string) string
	// deprecated, when set, makes this option a deprecated alias: the
	// message says what to use instead. Aliases are not printed by
	// config print and are listed apart in -h.
	deprecated string
	value      flag.Value
	def        string // the default, as its value's String before any layer
	source     string // where the effective value came from: default, file, environment, flag
}

// env is the option's environment variable: AIRLOCK_ and the name in
// upper case with '-' as '_'.
func (o *option) env() string {
	return "AIRLOCK_" + strings.ToUpper(strings.ReplaceAll(o.name, "-", "_"))
}

// set sets the option from one textual value of layer.
func (o *option) set(v, layer string) error {
	if err := o.value.Set(v); err != nil {
		return err
	}
	o.source = layer
	return nil
}

// options are airlockd's settings in the order they were registered.
type options struct {
	list   []*option
	byName map[string]*option
}

func (r *options) add(o *option) *option {
	if r.byName == nil {
		r.byName = map[string]*option{}
	}
	if _, dup := r.byName[o.name]; dup {
		panic("airlockd: option registered twice: " + o.name)
	}
	o.def = o.value.String()
	o.source = "default"
	r.list = append(r.list, o)
	r.byName[o.name] = o
	return o
}

// The value types below are the flag.Values of the options; booleans are
// parsed strictly (boolValue), lists split on commas.

func (r *options) str(p *string, name string, g group, usage string) *option {
	return r.add(&option{name: name, group: g, kind: kindString, usage: usage, value: (*stringValue)(p)})
}

func (r *options) boolean(p *bool, name string, g group, usage string) *option {
	return r.add(&option{name: name, group: g, kind: kindBool, usage: usage, value: (*boolValue)(p)})
}

func (r *options) integer(p *int, name string, g group, usage string) *option {
	return r.add(&option{name: name, group: g, kind: kindInt, usage: usage, value: (*intValue)(p)})
}

func (r *options) int64(p *int64, name, unit string, g group, usage string) *option {
	return r.add(&option{name: name, group: g, kind: kindInt, unit: unit, usage: usage, value: (*int64Value)(p)})
}

func (r *options) float(p *float64, name, unit string, g group, usage string) *option {
	return r.add(&option{name: name, group: g, kind: kindFloat, unit: unit, usage: usage, value: (*floatValue)(p)})
}

func (r *options) duration(p *time.Duration, name string, g group, usage string) *option {
	return r.add(&option{name: name, group: g, kind: kindDuration, usage: usage, value: (*durationValue)(p)})
}

func (r *options) strings(p *[]string, name string, g group, usage string) *option {
	return r.add(&option{name: name, group: g, kind: kindList, usage: usage, value: (*listValue)(p)})
}

func (r *options) repeat(v flag.Value, name string, g group, usage string) *option {
	return r.add(&option{name: name, group: g, kind: kindRepeat, usage: usage, value: v})
}

// alias registers a deprecated alias: a setting of its own (set by
// value) that airlockd still honours for one release, with a warning
// that says to use instead.
func (r *options) alias(name, instead string, k kind, v flag.Value, g group) *option {
	return r.add(&option{name: name, group: g, kind: k, value: v,
		deprecated: instead, usage: "deprecated: " + instead})
}

type stringValue string

func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }
func (v *stringValue) String() string     { return string(*v) }

// boolValue accepts true, false, 1, 0, t, f, yes, no, on and off in any
// case, and nothing else: an unknown value is an error, never false.
type boolValue bool

func (v *boolValue) Set(s string) error {
	b, err := parseBool(s)
	if err != nil {
		return err
	}
	*v = boolValue(b)
	return nil
}
func (v *boolValue) String() string   { return strconv.FormatBool(bool(*v)) }
func (v *boolValue) IsBoolFlag() bool { return true }

// errBadBool is the error of a boolean that is none of the spellings.
var errBadBool = fmt.Errorf("want true or false (or 1/0, yes/no, on/off)")

func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "t", "true", "yes", "y", "on":
		return true, nil
	case "0", "f", "false", "no", "n", "off":
		return false, nil
	}
	return false, fmt.Errorf("%q: %w", s, errBadBool)
}

// invertedBool sets *p to the opposite of the boolean it is given: the
// old --no-x switches, aliases of --x=false.
type invertedBool struct{ p *bool }

func (v invertedBool) Set(s string) error {
	b, err := parseBool(s)
	if err != nil {
		return err
	}
	*v.p = !b
	return nil
}
func (v invertedBool) String() string {
	if v.p == nil {
		return "false"
	}
	return strconv.FormatBool(!*v.p)
}
func (v invertedBool) IsBoolFlag() bool { return true }

type intValue int

func (v *intValue) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 0, strconv.IntSize)
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	*v = intValue(n)
	return nil
}
func (v *intValue) String() string { return strconv.Itoa(int(*v)) }

type int64Value int64

func (v *int64Value) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 0, 64)
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	*v = int64Value(n)
	return nil
}
func (v *int64Value) String() string { return strconv.FormatInt(int64(*v), 10) }

type floatValue float64

func (v *floatValue) Set(s string) error {
	n, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return fmt.Errorf("%q is not a number", s)
	}
	*v = floatValue(n)
	return nil
}
func (v *floatValue) String() string { return strconv.FormatFloat(float64(*v), 'g', -1, 64) }

type durationValue time.Duration

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a duration (e.g. 90s, 5m, 1h30m)", s)
	}
	*v = durationValue(d)
	return nil
}
func (v *durationValue) String() string { return time.Duration(*v).String() }

// listValue is a comma-separated list; setting it replaces the list.
type listValue []string

func (v *listValue) Set(s string) error { *v = splitList(s); return nil }
func (v *listValue) String() string     { return strings.Join(*v, ",") }

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
