package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

const configUsage = `Usage:
  airlockd config check [flags]   check the settings and exit: 0 when good, 1 naming the bad one
  airlockd config print [flags]   print the effective settings as TOML (a --config file), secrets redacted
  airlockd config docs [-o FILE]  print the configuration reference in Markdown

check and print read the same --config file, AIRLOCK_* environment and flags
as airlockd itself (airlockd -h lists them).
`

// configCommand is `airlockd config ...`; it never starts the node.
func configCommand(args []string, stdout, stderr io.Writer, env lookupEnv) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		if len(args) == 0 {
			fmt.Fprint(stderr, configUsage)
			return 2
		}
		fmt.Fprint(stdout, configUsage)
		return 0
	}
	switch args[0] {
	case "check", "print":
		f := newFlags()
		warnings, err := f.load(args[1:], env)
		if errors.Is(err, flag.ErrHelp) {
			f.usage(stdout)
			return 0
		}
		if err == nil {
			_, err = f.config()
		}
		if err != nil {
			fmt.Fprintf(stderr, "airlockd config %s: %v\n", args[0], err)
			return 1
		}
		for _, w := range warnings {
			fmt.Fprintf(stderr, "airlockd config %s: warning: %s\n", args[0], w)
		}
		if args[0] == "check" {
			fmt.Fprintln(stdout, "configuration ok")
			return 0
		}
		f.print(stdout)
		return 0
	case "docs":
		fs := flag.NewFlagSet("airlockd config docs", flag.ContinueOnError)
		fs.SetOutput(stderr)
		out := fs.String("o", "", "write to this file instead of standard output")
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "airlockd config docs: unexpected argument %q\n", fs.Arg(0))
			return 2
		}
		doc := newFlags().markdown()
		if *out == "" {
			io.WriteString(stdout, doc)
			return 0
		}
		if err := os.WriteFile(*out, []byte(doc), 0o644); err != nil {
			fmt.Fprintf(stderr, "airlockd config docs: %v\n", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(stderr, "airlockd config: unknown command %q\n%s", args[0], configUsage)
	return 2
}

// print writes the effective settings as a TOML config file: every
// option, by group, with where its value came from when not the default.
// Secrets are redacted: a partly secret one (a URL) without its
// password, the others commented out.
func (f *flags) print(w io.Writer) {
	fmt.Fprintln(w, "# airlockd's effective settings (airlockd config print): a --config file.")
	for g := group(0); g < numGroups; g++ {
		fmt.Fprintf(w, "\n# %s\n", groupTitles[g])
		for _, o := range f.opts.list {
			if o.group != g || o.deprecated != "" || o.name == "config" {
				continue
			}
			note := ""
			if o.source != "default" {
				note = "  # from the " + o.source
			}
			v := o.value.String()
			switch {
			case o.secret && v != "" && o.redact != nil:
				if r := o.redact(v); r != v {
					note += "  # password redacted"
					v = r
				}
				fmt.Fprintf(w, "%s = %s%s\n", o.name, tomlString(v), note)
			case o.secret && v != "":
				fmt.Fprintf(w, "# %s = (redacted)%s\n", o.name, note)
			default:
				fmt.Fprintf(w, "%s = %s%s\n", o.name, tomlValue(o, v), note)
			}
		}
	}
}

// tomlValue writes an option's value as TOML.
func tomlValue(o *option, v string) string {
	switch o.kind {
	case kindBool, kindInt:
		return v
	case kindFloat:
		if !strings.ContainsAny(v, ".eE") && !strings.Contains(v, "Inf") && !strings.Contains(v, "NaN") {
			return v + ".0"
		}
		return v
	case kindList:
		return tomlArray(splitList(v))
	case kindRepeat:
		return tomlArray(strings.Fields(v))
	}
	return tomlString(v)
}

func tomlArray(elems []string) string {
	q := make([]string, len(elems))
	for i, e := range elems {
		q[i] = tomlString(e)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// tomlString is s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\u` + fmt.Sprintf("%04X", r))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
