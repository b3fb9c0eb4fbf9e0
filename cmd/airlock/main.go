// Command airlock is the Airlock CLI: it runs code through a server, and
// administers a node's images, tenants and keys.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/airlockhq/airlock/backend/microvm/jailer"
)

// command is one subcommand; each lives in its own file.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string) error) {
	commands[name] = command{summary: summary, run: run}
}

// exitError carries an exit code out of a subcommand (e.g. the exit code of
// the user's program for "airlock run").
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func usage() {
	fmt.Fprintln(os.Stderr, "usage: airlock COMMAND [flags] [args]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", n, commands[n].summary)
	}
}

func main() {
	jailer.RunIfAsked() // this binary run again as a microVM's jailer (bench-backends): execs QEMU, never returns
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "airlock: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cmd.run(ctx, os.Args[2:])
	stop()
	var ee exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		os.Exit(ee.code)
	default:
		fmt.Fprintf(os.Stderr, "airlock %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
