package gvisor

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// globalFlags are runsc's flags before the subcommand.
func (b *Backend) globalFlags() []string {
	f := []string{
		"--root", b.cfg.runscRoot(),
		"--platform", b.cfg.Platform,
		"--network", "none",
		"--overlay2", "none",
		// The agent may connect to the host socket of its channel (the
		// only host socket any mount of a sandbox holds).
		"--host-uds", "open",
	}
	return append(f, b.cfg.ExtraFlags...)
}

// runsc runs a short runsc subcommand and returns its combined output.
func (b *Backend) runsc(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.cfg.Runsc, append(b.globalFlags(), args...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("runsc %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// listContainers returns the IDs of the containers runsc knows.
func (b *Backend) listContainers(ctx context.Context) ([]string, error) {
	out, err := b.runsc(ctx, "list", "--quiet")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// Version returns `runsc --version` output, first line.
func (b *Backend) Version(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, b.cfg.Runsc, "--version").Output()
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line), nil
}
