package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

const volumeUsage = `usage:
  airlock volume create NAME --size-mib N [-o json|table]
  airlock volume create NAME --from-snapshot SNAPSHOT [--size-mib N] [-o json|table]
  airlock volume ls [-o json|table]
  airlock volume show NAME [-o json|table]
  airlock volume rm NAME...
  airlock volume snapshot create NAME [--name LABEL] [-o json|table]
  airlock volume snapshot ls NAME [-o json|table]
  airlock volume snapshot rm NAME SNAPSHOT...

Volumes are a tenant's named disks of a fixed size that outlive sessions:
'airlock session create --volume NAME:PATH' mounts one at PATH (add :ro
for a read-only mount beside the one writer). A volume's size counts
against the tenant's volume_bytes quota; rm deletes it and its data, and
is refused while a session has it mounted.

A volume snapshot is a sealed copy of its files (encrypted under the
tenant's key, like session snapshots), taken while no session writes the
volume; 'volume create --from-snapshot' makes a new volume holding them
(of the snapshot's size unless --size-mib says otherwise). Snapshots
outlive their volume and count against the tenant's snapshot quota.

flags:
  --size-mib N            the volume's size in MiB (16 to 1048576)
  --from-snapshot ID      start the new volume with a snapshot's files
  --name LABEL            a label for the snapshot
  -o, --output FORMAT     table or json; create prints only the name (or
                          the snapshot's ID) without it
  --url URL, --key KEY, --profile NAME
                          server, API key and profile (see airlock login)
`

func runVolume(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		return errUsage("volume", "want a subcommand: create, ls, show, rm or snapshot")
	}
	verb := args[0]
	switch verb {
	case "create", "ls", "list", "show", "get", "rm", "delete":
	case "snapshot", "snapshots":
		return runVolumeSnapshot(ctx, args[1:], std)
	default:
		return errUsage("volume", "unknown subcommand %q (want create, ls, show, rm or snapshot)", verb)
	}
	fs := newFlagSet("volume "+verb, volumeUsage, std.err)
	var srv serverFlags
	var out outputFlags
	srv.register(fs)
	out.register(fs, true)
	size := fs.Int64("size-mib", 0, "")
	from := fs.String("from-snapshot", "", "")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return flagErr(err)
	}
	switch verb {
	case "create":
		if len(pos) != 1 {
			return errUsage("volume create", "want one NAME")
		}
		if *size <= 0 && *from == "" {
			return errUsage("volume create", "want --size-mib N (or --from-snapshot SNAPSHOT)")
		}
	case "show", "get":
		if len(pos) != 1 {
			return errUsage("volume show", "want one NAME")
		}
	case "rm", "delete":
		if len(pos) == 0 {
			return errUsage("volume rm", "want one or more NAMEs")
		}
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	fail := func(err error) error { return apiFailed(std, err, &srv) }
	switch verb {
	case "create":
		v, err := c.CreateVolume(ctx, airlock.CreateVolumeRequest{Name: pos[0], SizeMiB: max(*size, 0), FromSnapshot: *from})
		if err != nil {
			return fail(err)
		}
		switch {
		case out.json(std):
			return writeJSON(std.out, v)
		case out.format == formatTable:
			return writeRecord(std.out, v)
		}
		fmt.Fprintln(std.out, v.Name)
		return nil
	case "ls", "list":
		vs, err := c.ListVolumes(ctx)
		if err != nil {
			return fail(err)
		}
		if out.json(std) {
			return writeJSON(std.out, vs)
		}
		t := newTable(std.out, "NAME", "SIZE_MIB", "MOUNTED_BY", "CREATED")
		for _, v := range vs {
			var by []string
			for _, m := range v.Mounts {
				mode := "rw"
				if m.ReadOnly {
					mode = "ro"
				}
				by = append(by, m.SessionID+":"+mode)
			}
			mounted := strings.Join(by, ",")
			if mounted == "" {
				mounted = "-"
			}
			t.row(v.Name, v.SizeMiB, mounted, v.CreatedAt.Local().Format(time.DateTime))
		}
		return t.flush()
	case "show", "get":
		v, err := c.Volume(ctx, pos[0])
		if err != nil {
			return fail(err)
		}
		if out.json(std) {
			return writeJSON(std.out, v)
		}
		return writeRecord(std.out, v)
	}
	for _, name := range pos {
		if err := c.DeleteVolume(ctx, name); err != nil {
			return fail(err)
		}
		fmt.Fprintf(std.out, "%s deleted\n", printableText(name))
	}
	return nil
}

// runVolumeSnapshot is 'airlock volume snapshot create|ls|rm'.
func runVolumeSnapshot(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		return errUsage("volume snapshot", "want a subcommand: create, ls or rm")
	}
	verb := args[0]
	switch verb {
	case "create", "ls", "list", "rm", "delete":
	default:
		return errUsage("volume snapshot", "unknown subcommand %q (want create, ls or rm)", verb)
	}
	fs := newFlagSet("volume snapshot "+verb, volumeUsage, std.err)
	var srv serverFlags
	var out outputFlags
	srv.register(fs)
	out.register(fs, true)
	label := fs.String("name", "", "")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return flagErr(err)
	}
	switch verb {
	case "create", "ls", "list":
		if len(pos) != 1 {
			return errUsage("volume snapshot "+verb, "want one volume NAME")
		}
	case "rm", "delete":
		if len(pos) < 2 {
			return errUsage("volume snapshot rm", "want a volume NAME and one or more SNAPSHOTs")
		}
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	fail := func(err error) error { return apiFailed(std, err, &srv) }
	switch verb {
	case "create":
		s, err := c.CreateVolumeSnapshot(ctx, pos[0], airlock.CreateVolumeSnapshotRequest{Name: *label})
		if err != nil {
			return fail(err)
		}
		switch {
		case out.json(std):
			return writeJSON(std.out, s)
		case out.format == formatTable:
			return writeRecord(std.out, s)
		}
		fmt.Fprintln(std.out, s.ID)
		return nil
	case "ls", "list":
		list, err := c.ListVolumeSnapshots(ctx, pos[0])
		if err != nil {
			return fail(err)
		}
		if out.json(std) {
			return writeJSON(std.out, list)
		}
		t := newTable(std.out, "SNAPSHOT", "NAME", "SIZE_MIB", "BYTES", "ENTRIES", "CREATED")
		for _, s := range list {
			t.row(s.ID, printableText(s.Name), s.SizeMiB, s.Bytes, s.Entries, s.CreatedAt.Local().Format(time.DateTime))
		}
		return t.flush()
	}
	for _, id := range pos[1:] {
		if err := c.DeleteVolumeSnapshot(ctx, pos[0], id); err != nil {
			return fail(err)
		}
		fmt.Fprintf(std.out, "%s deleted\n", printableText(id))
	}
	return nil
}

// volumeFlag collects --volume NAME:PATH[:ro].
type volumeFlag []airlock.VolumeMount

func (v *volumeFlag) String() string { return "" }

func (v *volumeFlag) Set(s string) error {
	name, rest, ok := strings.Cut(s, ":")
	if !ok || name == "" || rest == "" {
		return fmt.Errorf("want NAME:PATH or NAME:PATH:ro")
	}
	m := airlock.VolumeMount{Name: name, Path: rest}
	if p, mode, ok := strings.Cut(rest, ":"); ok {
		switch mode {
		case "ro":
			m.ReadOnly = true
		case "rw":
		default:
			return fmt.Errorf("mode %s: want ro or rw", strconv.Quote(mode))
		}
		m.Path = p
	}
	*v = append(*v, m)
	return nil
}
