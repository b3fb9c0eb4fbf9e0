package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/airlockhq/airlock/internal/version"
)

// command is one node of the command tree: a group (subs) that dispatches
// on its first argument, or a leaf (run) that parses its own flags.
type command struct {
	name    string
	aliases []string // other spellings, not listed (ls and list)
	summary string   // one line in the parent's help
	section string   // the heading it is listed under in the parent's help
	usage   string   // a leaf's help, printed for -h, --help and 'airlock help ...'
	run     func(ctx context.Context, args []string, std stdio) error
	subs    []*command
	// words are the subcommands a leaf's run dispatches itself (session
	// create, ls, ...), for completion.
	words []string
	// hidden leaves the command out of help and completion: the old
	// spellings kept for one release.
	hidden bool
	// moved is, for an old spelling, the command path that replaces it
	// ("node image"): using it prints a one-line warning on stderr.
	moved string
}

// sub returns the child named (or aliased) name.
func (c *command) sub(name string) *command {
	for _, s := range c.subs {
		if s.name == name || slices.Contains(s.aliases, name) {
			return s
		}
	}
	return nil
}

// usageErr is a command-line mistake: main prints it with a hint and
// exits 2.
type usageErr struct {
	path string // the command path, "session create"
	msg  string
}

func (e *usageErr) Error() string { return e.msg }

// errUsage returns a usage error of the command path.
func errUsage(path, format string, args ...any) error {
	return &usageErr{path: path, msg: fmt.Sprintf(format, args...)}
}

// exitError carries an exit code out of a subcommand (e.g. the exit code of
// the user's program for "airlock run"); whatever was to be said has been
// printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Exit statuses (docs/cli.md, "Exit status").
const (
	exitOK     = 0
	exitFailed = 1 // the operation failed: the server said no, a file could not be written, ...
	exitUsage  = 2 // a command-line mistake: nothing was done
	// exitAirlockFailed is what run and exec exit with when airlock
	// itself failed (network, API error, artifact not saved), as docker
	// run does, since their other statuses are the program's own.
	exitAirlockFailed = 125
)

// isHelpFlag reports whether a is a request for help.
func isHelpFlag(a string) bool {
	return a == "-h" || a == "--help" || a == "-help"
}

// wantsHelp reports whether args ask for help before any "--": -h is
// never taken as an argument, so 'airlock master-key generate -h' prints
// help and writes nothing.
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelpFlag(a) {
			return true
		}
	}
	return false
}

// execute runs the command line args (without the program name) on the
// tree under root and returns the exit status; messages go to std.
func execute(ctx context.Context, root *command, args []string, std stdio) int {
	if version.IsFlag(args) {
		fmt.Fprintln(std.out, version.Line("airlock"))
		return exitOK
	}
	path, err := dispatch(ctx, root, nil, args, std)
	return exitStatus(err, path, std.err)
}

// exitStatus prints err (unless it has been) and maps it to a status.
func exitStatus(err error, path []string, w io.Writer) int {
	var ee exitError
	var ue *usageErr
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		p := ue.path
		if p == "" {
			p = strings.Join(path, " ")
		}
		fmt.Fprintf(w, "airlock %s: %s\nRun 'airlock %s -h' for usage.\n", p, ue.msg, p)
		return exitUsage
	}
	fmt.Fprintf(w, "airlock %s: %s\n", strings.Join(path, " "), printableText(err.Error()))
	return exitFailed
}

// dispatch walks from c down the tree along args and runs the leaf. It
// returns the path walked, for messages.
func dispatch(ctx context.Context, c *command, path, args []string, std stdio) ([]string, error) {
	for c.run == nil {
		if len(args) == 0 {
			writeGroupHelp(std.err, c, path)
			return path, exitError{exitUsage}
		}
		a := args[0]
		switch {
		case isHelpFlag(a):
			writeGroupHelp(std.out, c, path)
			return path, nil
		case a == "help":
			return path, help(c, path, args[1:], std)
		}
		next := c.sub(a)
		if next == nil {
			if strings.HasPrefix(a, "-") {
				return path, errUsage(strings.Join(path, " "), "unknown flag %q before a subcommand", a)
			}
			return path, errUsage(strings.Join(path, " "), "unknown command %q", a)
		}
		path = append(path, next.name)
		if next.moved != "" {
			fmt.Fprintf(std.err, "airlock: '%s' is deprecated and goes in the next release; use 'airlock %s'\n",
				strings.Join(append([]string{"airlock"}, path...), " "), next.moved)
		}
		c, args = next, args[1:]
	}
	if wantsHelp(args) {
		fmt.Fprint(std.out, c.usage)
		return path, nil
	}
	return path, c.run(ctx, args, std)
}

// help prints the help of the command that args name under c.
func help(c *command, path, args []string, std stdio) error {
	for _, a := range args {
		if c.run != nil {
			break
		}
		next := c.sub(a)
		if next == nil {
			return errUsage(strings.Join(path, " "), "no help for unknown command %q", a)
		}
		c, path = next, append(path, next.name)
	}
	if c.run != nil {
		fmt.Fprint(std.out, c.usage)
		return nil
	}
	writeGroupHelp(std.out, c, path)
	return nil
}

// writeGroupHelp lists a group's commands under their sections.
func writeGroupHelp(w io.Writer, c *command, path []string) {
	name := strings.Join(append([]string{"airlock"}, path...), " ")
	if c.usage != "" {
		fmt.Fprint(w, c.usage)
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "usage: %s COMMAND [flags] [args]\n", name)
	section := "\x00"
	for _, s := range c.subs {
		if s.hidden {
			continue
		}
		if s.section != section {
			section = s.section
			if section == "" {
				fmt.Fprintln(w, "\ncommands:")
			} else {
				fmt.Fprintf(w, "\n%s:\n", section)
			}
		}
		fmt.Fprintf(w, "  %-14s %s\n", s.name, s.summary)
	}
	fmt.Fprintf(w, "\nRun '%s COMMAND -h' for a command's flags. Exit status: 0 ok, 1 failed, 2 usage error (run and exec: the program's own).\n", name)
}
