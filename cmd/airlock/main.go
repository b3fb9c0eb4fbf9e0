// Command airlock is the Airlock CLI: client commands run code through a
// server with a tenant's key, 'airlock admin' administers tenants and
// keys over the admin API, and 'airlock node' works on this host's state
// directory. docs/cli.md describes every command.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/airlockhq/airlock/backend/microvm/jailer"
)

func main() {
	jailer.RunIfAsked() // this binary run again as a microVM's jailer (bench-backends): execs QEMU, never returns
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, tree(), os.Args[1:], osStdio())
	stop()
	os.Exit(code)
}
