package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

const usageHead = `Usage:
  airlockd [flags]                 run the node
  airlockd config check [flags]    check the settings (file, environment, flags) and exit
  airlockd config print [flags]    print the effective settings as TOML, secrets redacted
  airlockd config docs             print the configuration reference (docs/configuration.md)
  airlockd --version               print the version

Every flag is also an environment variable, AIRLOCK_ and its name in upper
case with '-' as '_', and a key of the --config file (TOML, e.g.
max-concurrent = 4). A flag wins over the environment, the environment over
the file, the file over the default. Booleans are true or false (also 1/0,
yes/no, on/off); anything else is an error.
`

// usage writes the grouped -h text: each group's options under its
// heading, the deprecated aliases last. It shows the built-in defaults,
// never a value from the environment or a file, and never a secret.
func (f *flags) usage(w io.Writer) {
	fmt.Fprint(w, usageHead)
	for g := group(0); g < numGroups; g++ {
		fmt.Fprintf(w, "\n%s:\n", groupTitles[g])
		for _, o := range f.opts.list {
			if o.group == g && o.deprecated == "" {
				writeFlag(w, o)
			}
		}
	}
	fmt.Fprintf(w, "\nDeprecated (still honoured, with a warning, until the next release):\n")
	for _, o := range f.opts.list {
		if o.deprecated != "" {
			fmt.Fprintf(w, "  -%s\n    \t%s (env %s)\n", o.name, o.deprecated, o.env())
		}
	}
}

func writeFlag(w io.Writer, o *option) {
	var b strings.Builder
	fmt.Fprintf(&b, "  -%s", o.name)
	if arg := argName(o); arg != "" {
		b.WriteString(" " + arg)
	}
	b.WriteString("\n    \t" + o.usage)
	if o.unit != "" {
		fmt.Fprintf(&b, ", in %s", o.unit)
	}
	if d := o.def; d != "" && !o.secret && !(o.kind == kindBool && d == "false") && !(o.kind == kindInt && d == "0") {
		if o.kind == kindString || o.kind == kindList {
			d = strconv.Quote(d)
		}
		fmt.Fprintf(&b, " (default %s)", d)
	}
	if o.secret {
		b.WriteString(" (secret)")
	}
	fmt.Fprintf(&b, " (env %s)\n", o.env())
	io.WriteString(w, b.String())
}

func argName(o *option) string {
	switch o.kind {
	case kindBool:
		return ""
	case kindInt:
		return "int"
	case kindFloat:
		return "number"
	case kindDuration:
		return "duration"
	case kindList:
		return "list"
	case kindRepeat:
		return "value"
	}
	return "string"
}
