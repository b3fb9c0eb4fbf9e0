package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/service/image"
)

const imageUsage = `usage (airlock node image; "airlock image" is deprecated):
  airlock image build [--state-dir DIR] [--agent PATH] [--mirror URL] [--guest] NAME...   (NAME may be "all")
  airlock image scan [--state-dir DIR] [--broker-config FILE] NAME...   (checks built images for credentials)
  airlock image ls [--state-dir DIR] [-o json|table]
  airlock image prune [--state-dir DIR] [--agent PATH]   (removes images other than the current one of each name)`

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
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: airlock image prune [--state-dir DIR] [--agent PATH]")
		return exitError{2}
	}
	if *agent == "" {
		if p, err := defaultAgent(); err == nil {
			*agent = p
		}
	}
	st, err := image.NewStore(image.StoreConfig{StateDir: *stateDir, AgentPath: *agent})
	if err != nil {
		return err
	}
	removed, err := st.Prune(ctx)
	for _, d := range removed {
		fmt.Fprintf(os.Stderr, "removed %s\n", d)
	}
	return err
}
