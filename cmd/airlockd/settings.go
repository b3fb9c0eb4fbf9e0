package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// The one precedence rule of airlockd's settings, applied here and
// nowhere else: a flag wins over the environment, the environment over
// the config file, the file over the default. load applies the layers in
// that rising order, so each overwrites what the one below set.
// Repeatable options (--quota, --network-allow, ...) are maps: each
// layer sets the entries it names, and wins for those.

// errUsage is wrapped by the errors of a bad command line, environment
// or config file: airlockd exits 2 on them.
var errUsage = errors.New("usage")

// usageErr is an error of the settings: its message says which setting
// and what is wrong with it.
type usageErr struct{ msg string }

func (e usageErr) Error() string { return e.msg }
func (e usageErr) Unwrap() error { return errUsage }

func usagef(format string, a ...any) error { return usageErr{fmt.Sprintf(format, a...)} }

// lookupEnv is os.LookupEnv, or a test's environment.
type lookupEnv func(string) (string, bool)

// cliSetting is one flag of the command line, applied after the file and
// the environment.
type cliSetting struct {
	o    *option
	name string // as given, for errors
	v    string
}

// recorder is the flag.Value of an option on the command line: it only
// records, so that the command line can be applied last.
type recorder struct {
	o    *option
	list *[]cliSetting
}

func (r recorder) String() string { return "" }
func (r recorder) Set(v string) error {
	*r.list = append(*r.list, cliSetting{r.o, r.o.name, v})
	return nil
}
func (r recorder) IsBoolFlag() bool { return r.o.kind == kindBool }

// load sets the options from the config file (--config, or
// AIRLOCK_CONFIG), the environment and args, in that rising precedence.
// It returns the warnings of deprecated names that were used. A bad
// setting is an error that names it; -h is flag.ErrHelp.
func (f *flags) load(args []string, env lookupEnv) (warnings []string, err error) {
	var cli []cliSetting
	fs := flag.NewFlagSet("airlockd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for _, o := range f.opts.list {
		fs.Var(recorder{o, &cli}, o.name, o.usage)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q: airlockd takes flags only (commands: airlockd config check|print|docs, airlockd --version)", fs.Arg(0))
	}
	path := ""
	if v, ok := env(f.opts.byName["config"].env()); ok {
		path = v
	}
	for _, s := range cli {
		if s.o.name == "config" {
			path = s.v
		}
	}
	if path != "" {
		if err := f.applyFile(path); err != nil {
			return nil, err
		}
	}
	for _, o := range f.opts.list {
		v, ok := env(o.env())
		if !ok || v == "" {
			continue // unset, or set to nothing: as before, the default stands
		}
		vals := []string{v}
		if o.kind == kindRepeat {
			vals = strings.Fields(v)
		}
		for _, v := range vals {
			if err := o.set(v, "environment"); err != nil {
				return nil, usagef("%s: %v", o.env(), err)
			}
		}
	}
	for _, s := range cli {
		if err := s.o.set(s.v, "flag"); err != nil {
			return nil, usagef("--%s: %v", s.name, err)
		}
	}
	for _, o := range f.opts.list {
		if o.deprecated == "" || o.source == "default" {
			continue
		}
		var as string
		switch o.source {
		case "flag":
			as = "--" + o.name
		case "environment":
			as = o.env()
		default:
			as = fmt.Sprintf("key %s of %s", o.name, path)
		}
		warnings = append(warnings, fmt.Sprintf("%s is deprecated and goes in the next release: %s", as, o.deprecated))
	}
	f.settle()
	return warnings, nil
}

// settle folds the deprecated settings that are not plain aliases into
// the options that replace them, so the options alone say the
// configuration.
func (f *flags) settle() {
	if len(f.abuseDisable) > 0 {
		f.detectors = slices.DeleteFunc(f.detectors, func(d string) bool { return slices.Contains(f.abuseDisable, d) })
		f.abuseDisable = nil
		f.opts.byName["abuse-detectors"].source = f.opts.byName["abuse-disable"].source
	}
}

// applyFile sets the options the TOML file at path names. Its keys are
// the options' names; an unknown key, a value of the wrong type and a
// bad value are errors that name the key.
func (f *flags) applyFile(path string) error {
	var m map[string]any
	md, err := toml.DecodeFile(path, &m)
	if err != nil {
		return usagef("config file %s: %v", path, err)
	}
	for _, key := range md.Keys() {
		if len(key) != 1 {
			continue // inside a table; the table itself is refused below
		}
		name := key[0]
		o := f.opts.byName[name]
		if o == nil {
			hint := ""
			if alt := strings.ReplaceAll(strings.ToLower(name), "_", "-"); f.opts.byName[alt] != nil {
				hint = fmt.Sprintf(" (did you mean %s?)", alt)
			}
			return usagef("config file %s: unknown key %q%s", path, name, hint)
		}
		if name == "config" {
			return usagef("config file %s: key %q: a config file cannot name another", path, name)
		}
		vals, err := fileValues(o, m[name])
		if err != nil {
			return usagef("config file %s: key %q: %v", path, name, err)
		}
		for _, v := range vals {
			if err := o.set(v, "file"); err != nil {
				return usagef("config file %s: key %q: %v", path, name, err)
			}
		}
	}
	return nil
}

// fileValues turns a TOML value into the texts the option is set with,
// refusing a value of the wrong type.
func fileValues(o *option, v any) ([]string, error) {
	bad := func(want string) ([]string, error) {
		return nil, fmt.Errorf("want %s, not %s", want, tomlType(v))
	}
	switch o.kind {
	case kindBool:
		if b, ok := v.(bool); ok {
			return []string{strconv.FormatBool(b)}, nil
		}
		return bad("a boolean (true or false)")
	case kindInt:
		if n, ok := v.(int64); ok {
			return []string{strconv.FormatInt(n, 10)}, nil
		}
		return bad("an integer")
	case kindFloat:
		switch n := v.(type) {
		case int64:
			return []string{strconv.FormatInt(n, 10)}, nil
		case float64:
			return []string{strconv.FormatFloat(n, 'g', -1, 64)}, nil
		}
		return bad("a number")
	case kindDuration:
		if s, ok := v.(string); ok {
			return []string{s}, nil
		}
		return bad(`a duration as a string (e.g. "90s", "5m")`)
	case kindString:
		if s, ok := v.(string); ok {
			return []string{s}, nil
		}
		return bad("a string")
	case kindList, kindRepeat:
		if s, ok := v.(string); ok {
			return []string{s}, nil
		}
		a, ok := v.([]any)
		if !ok {
			return bad("an array of strings")
		}
		var out []string
		for _, e := range a {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("want an array of strings, not one holding %s", tomlType(e))
			}
			out = append(out, s)
		}
		if o.kind == kindList {
			return []string{strings.Join(out, ",")}, nil
		}
		return out, nil
	}
	return bad("a value")
}

func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return "a date or time"
}
