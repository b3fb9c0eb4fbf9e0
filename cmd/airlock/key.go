package main

import (
	"context"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
)

const keyUsage = `usage:
  airlock key create TENANT [--format airlock|e2b] [--state-dir DIR]

Makes a new API key for TENANT (a tenant name) in this node's store,
<state-dir>/airlock.db, and prints it on stdout: it is shown this once and
only its hash is stored. Run it on the server host, as the user that owns
the state directory (root).

flags:
  --format F       airlock (default: alk_ and base32) or e2b (e2b_ and 40
                   hex digits, the format some E2B SDK versions insist on);
                   both work on every API
  --state-dir DIR  the node's state directory (default $AIRLOCK_STATE_DIR,
                   else /var/lib/airlock)
`

func runKey(ctx context.Context, args []string, std stdio) error {
	deprecated(std, "key", "airlock admin key")
	if len(args) == 0 {
		return usageError(std.err, "key", "want a subcommand: create")
	}
	switch args[0] {
	case "create":
		return runKeyCreate(ctx, args[1:], std)
	case "-h", "--help", "help":
		fmt.Fprint(std.err, keyUsage)
		return nil
	}
	return usageError(std.err, "key", "unknown subcommand %q (want create)", args[0])
}

func runKeyCreate(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("key create", keyUsage, std.err)
	stateDir := fs.String("state-dir", stateDirDefault(), "")
	format := fs.String("format", "airlock", "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 1 {
		return usageError(std.err, "key", "create wants one TENANT")
	}
	newKey := airlock.NewAPIKey
	switch *format {
	case "airlock":
	case "e2b":
		newKey = airlock.NewE2BAPIKey
	default:
		return usageError(std.err, "key", "unknown --format %q (want airlock or e2b)", *format)
	}
	name := pos[0]
	if err := validTenantName(name); err != nil {
		return err
	}
	db, err := openStore(ctx, *stateDir, true)
	if err != nil {
		return err
	}
	defer db.Close()
	t, err := db.TenantByName(ctx, name)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		return fmt.Errorf("%w %q (create it with: airlock tenant create %s)", errNoTenant, name, name)
	}
	if err != nil {
		return err
	}
	secret, k := newKey(t.ID, newID(), time.Now())
	if err := db.CreateAPIKey(ctx, k); err != nil {
		return err
	}
	fmt.Fprintln(std.out, secret)
	fmt.Fprintf(std.err, "airlock: created key %s… for tenant %s; it is not shown again\n", k.Prefix, t.Name)
	return nil
}
