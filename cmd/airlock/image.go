package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/airlockhq/airlock/backend/gvisor"
	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/service/image"
	"github.com/airlockhq/airlock/service/template"
)

const imageUsage = `usage (airlock node image; "airlock image" is deprecated):
  airlock image build [--state-dir DIR] [--agent PATH] [--mirror URL] [--guest] NAME...   (NAME may be "all")
  airlock image scan [--state-dir DIR] [--broker-config FILE] NAME...   (checks built images for credentials)
  airlock image ls [--state-dir DIR] [-o json|table]
  airlock image prune [--state-dir DIR] [--agent PATH] [--dry-run]   (removes image versions, template leftovers, layers and Dockerfile build caches nothing uses)`

func runImage(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		return errUsage("node image", "want a subcommand: build, ls, scan or prune")
	}
	switch args[0] {
	case "build":
		return runImageBuild(ctx, args[1:])
	case "ls", "list":
		return runImageList(ctx, args[1:], std)
	case "scan":
		return runImageScan(ctx, args[1:])
	case "prune":
		return runImagePrune(ctx, args[1:])
	}
	return errUsage("node image", "unknown subcommand %q (want build, ls, scan or prune)", args[0])
}

// defaultAgent is airlock-agent next to the running airlock executable.
func defaultAgent() (string, error) {
	exe, err := os.Executable()
	if err == nil {
		p := filepath.Join(filepath.Dir(exe), "airlock-agent")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no airlock-agent next to the airlock executable; pass --agent PATH")
}

func runImageBuild(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("airlock image build", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: airlock image build [flags] NAME...\n\nNAME is one of %v or \"all\".\n\nflags:\n", image.Names())
		fs.PrintDefaults()
	}
	stateDir := fs.String("state-dir", stateDirDefault(), "node state directory ($AIRLOCK_STATE_DIR)")
	agent := fs.String("agent", "", "static airlock-agent binary (default: airlock-agent next to this executable)")
	mirror := fs.String("mirror", "", "Debian mirror URL (default: from the host's apt sources)")
	var hs hostSecretFlags
	hs.register(fs)
	guest := fs.Bool("guest", false, "also build each image's microVM guest artefacts (kernel, initramfs, root disk) from the kernel scripts/setup.sh unpacked into the state directory; the microvm backend otherwise builds them at its first boot of the image")
	names, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(names) == 0 {
		fs.Usage()
		return exitError{2}
	}
	var specs []string
	for _, n := range names {
		if n == "all" {
			specs = append(specs, image.Names()...)
			continue
		}
		if _, err := image.SpecByName(n); err != nil {
			return fmt.Errorf("unknown image %q (known: %v, or all)", n, image.Names())
		}
		specs = append(specs, n)
	}
	if *agent == "" {
		if *agent, err = defaultAgent(); err != nil {
			return err
		}
	}
	known, err := hs.known(*stateDir)
	if err != nil {
		return err
	}
	b, err := image.NewBuilder(image.Config{
		StateDir:  *stateDir,
		AgentPath: *agent,
		Mirror:    *mirror,
		Progress:  os.Stdout,
		// What airlockd holds may not end up in an image either.
		Secrets: secretscan.Default().WithKnown(known),
	})
	if err != nil {
		return err
	}
	done := map[string]bool{}
	for _, n := range specs {
		if done[n] {
			continue
		}
		done[n] = true
		spec, _ := image.SpecByName(n)
		start := time.Now()
		img, err := b.Build(ctx, spec)
		if err != nil {
			return fmt.Errorf("build %s: %w", n, err)
		}
		fmt.Printf("%s %s %s in %s: %s\n", img.Name, image.Short(img.Hash), image.HumanSize(img.SizeBytes),
			time.Since(start).Round(100*time.Millisecond), img.Rootfs)
		if *guest {
			abs, err := filepath.Abs(*stateDir)
			if err != nil {
				return err
			}
			g, err := image.BuildGuest(ctx, image.GuestConfig{StateDir: abs, Progress: os.Stdout}, img)
			if err != nil {
				return fmt.Errorf("guest of %s: %w", n, err)
			}
			fmt.Printf("%s guest %s: kernel %s, root disk %s: %s\n", img.Name, image.Short(g.Hash), g.KernelRelease,
				image.HumanSize(g.RootDiskBytes), filepath.Dir(g.RootDisk))
		}
	}
	return nil
}

func runImageList(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("node image ls", imageUsage+"\n", std.err)
	stateDir := fs.String("state-dir", stateDirDefault(), "")
	var out outputFlags
	out.register(fs, false)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		return errUsage("node image ls", "unexpected argument %q", pos[0])
	}
	st, err := image.NewStore(image.StoreConfig{StateDir: *stateDir})
	if err != nil {
		return err
	}
	imgs, err := st.List(ctx)
	if err != nil {
		return err
	}
	if out.json(std) {
		return writeJSON(std.out, map[string]any{"images": imgs})
	}
	t := newTable(std.out, "NAME", "HASH", "SIZE", "BUILT")
	for _, img := range imgs {
		t.row(img.Name, image.Short(img.Hash), image.HumanSize(img.SizeBytes), img.BuiltAt.Local().Format("2006-01-02 15:04:05"))
	}
	return t.flush()
}

func runImagePrune(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("airlock image prune", flag.ContinueOnError)
	stateDir := fs.String("state-dir", stateDirDefault(), "node state directory ($AIRLOCK_STATE_DIR)")
	agent := fs.String("agent", "", "the node's airlock-agent: images for it are kept (default: next to airlock)")
	snapshotDir := fs.String("snapshot-dir", "", "the node's base snapshots (default: STATE-DIR/snapshots)")
	dryRun := fs.Bool("dry-run", false, "print what would be removed and the space it would free; remove nothing")
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: airlock image prune [--state-dir DIR] [--agent PATH] [--snapshot-dir DIR] [--dry-run]")
		return exitError{2}
	}
	if *agent == "" {
		if p, err := defaultAgent(); err == nil {
			*agent = p
		}
	}
	if *snapshotDir == "" {
		*snapshotDir = filepath.Join(*stateDir, "snapshots")
	}
	st, err := image.NewStore(image.StoreConfig{StateDir: *stateDir, AgentPath: *agent})
	if err != nil {
		return err
	}
	// The versions the node's sandboxes run on (its gVisor sandboxes'
	// bundles) are kept, whatever their agent.
	used, err := gvisor.RootfsInUse(filepath.Join(*stateDir, "gvisor"))
	if err != nil {
		return fmt.Errorf("read the sandboxes' rootfs: %w", err)
	}
	verb := "removed"
	if *dryRun {
		verb = "would remove"
	}
	c, err := st.Collect(ctx, image.CollectConfig{InUse: used, DryRun: *dryRun})
	if err != nil {
		return err
	}
	removed, freed := c.Removed, c.FreedBytes
	// Templates, when the node has a store: leftovers no record or
	// session refers to, snapshots of deleted templates, unlisted layers,
	// and the Dockerfile step cache and FROM images no template lists and
	// no build in progress (a pin on disk) claims.
	if db, err := openStore(ctx, *stateDir, true); err == nil {
		defer db.Close()
		gcs, ok := db.(template.GCStore)
		if ok {
			tc, err := template.Collect(ctx, template.CollectConfig{
				StateDir: *stateDir, Store: gcs, SnapshotDir: *snapshotDir, DryRun: *dryRun,
				Building: func() bool { return buildsUnder(filepath.Join(*stateDir, "templates", ".tmp")) },
			})
			if tc != nil {
				removed, freed = append(removed, tc.Removed()...), freed+tc.FreedBytes
			}
			if err != nil {
				printRemoved(verb, removed, freed)
				return err
			}
		}
	} else if _, serr := os.Stat(filepath.Join(*stateDir, "templates")); serr == nil {
		fmt.Fprintf(os.Stderr, "templates not collected: %v\n", err)
	}
	printRemoved(verb, removed, freed)
	return nil
}

func printRemoved(verb string, removed []string, freed int64) {
	for _, d := range removed {
		fmt.Fprintf(os.Stderr, "%s %s\n", verb, d)
	}
	what := "freed"
	if verb != "removed" {
		what = "would free"
	}
	fmt.Fprintf(os.Stderr, "%s %s (%d bytes) in %d directories and files\n", what, image.HumanSize(freed), freed, len(removed))
}

// buildsUnder reports whether a template build is in progress (its
// directory under the templates' .tmp).
func buildsUnder(dir string) bool {
	ents, err := os.ReadDir(dir)
	return err == nil && len(ents) > 0
}
