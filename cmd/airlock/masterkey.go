package main

import (
	"context"
	"fmt"
	"os"

	"github.com/airlockhq/airlock/internal/seal"
)

const masterKeyUsage = `usage:
  airlock master-key generate FILE
  airlock master-key id FILE
  airlock master-key rotate --from OLD_FILE --to NEW_FILE [--state-dir DIR]

The master key wraps every tenant's snapshot data key; airlockd reads it
from --master-key-file (or the key itself from $AIRLOCK_MASTER_KEY).

  generate  writes a new random key (64 hex digits) to FILE, mode 0600;
            FILE must not exist
  id        prints the key's ID (as recorded with each wrapped data key)
  rotate    re-wraps, in this node's store (<state-dir>/airlock.db), every
            data key wrapped under OLD_FILE's key with NEW_FILE's key. The
            data keys themselves do not change, so every snapshot stays as
            it is and opens under the new key. Then restart airlockd with
            --master-key-file NEW_FILE. Keys wrapped under neither are
            reported and left alone. Safe to run again; while airlockd
            still runs with the old key, give it both (--master-key-file
            NEW --old-master-key-file OLD) or rotate while it is stopped.

flags:
  --state-dir DIR  the node's state directory (default $AIRLOCK_STATE_DIR,
                   else /var/lib/airlock)
`

func runMasterKey(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		return usageError(std.err, "master-key", "want a subcommand: generate, id or rotate")
	}
	switch args[0] {
	case "generate":
		if len(args) != 2 {
			return usageError(std.err, "master-key", "generate wants one FILE")
		}
		k, text := seal.GenerateMasterKey()
		f, err := os.OpenFile(args[1], os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(f, text); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintln(std.out, k.ID())
		return nil
	case "id":
		if len(args) != 2 {
			return usageError(std.err, "master-key", "id wants one FILE")
		}
		k, err := seal.LoadMasterKey(args[1])
		if err != nil {
			return err
		}
		fmt.Fprintln(std.out, k.ID())
		return nil
	case "rotate":
		return runMasterKeyRotate(ctx, args[1:], std)
	case "-h", "--help", "help":
		fmt.Fprint(std.err, masterKeyUsage)
		return nil
	}
	return usageError(std.err, "master-key", "unknown subcommand %q (want generate, id or rotate)", args[0])
}

func runMasterKeyRotate(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("master-key rotate", masterKeyUsage, std.err)
	stateDir := fs.String("state-dir", stateDirDefault(), "")
	from := fs.String("from", "", "")
	to := fs.String("to", "", "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 0 || *from == "" || *to == "" {
		return usageError(std.err, "master-key", "rotate wants --from OLD_FILE and --to NEW_FILE")
	}
	oldKey, err := seal.LoadMasterKey(*from)
	if err != nil {
		return err
	}
	newKey, err := seal.LoadMasterKey(*to)
	if err != nil {
		return err
	}
	db, err := openStore(ctx, *stateDir, true)
	if err != nil {
		return err
	}
	defer db.Close()
	keys, err := seal.NewKeys(db, newKey, oldKey)
	if err != nil {
		return err
	}
	r, err := keys.Rotate(ctx)
	fmt.Fprintf(std.out, "re-wrapped %d data keys under %s (%d were already)\n", r.Rewrapped, newKey.ID(), r.Current)
	return err
}
