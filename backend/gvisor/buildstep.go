package gvisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/cgroups"
)

var _ airlock.BuildRunner = (*Backend)(nil)

// buildCaps are the capabilities a root build step holds inside its
// sandbox: Docker's default set, so that package scripts can chown and
// setuid as they do in a Dockerfile build. They are capabilities of the
// gVisor kernel, never of the host.
var buildCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

func (c *Config) buildsDir() string { return filepath.Join(c.StateDir, "builds") }

// RunBuildStep runs one template build step: `runsc run` in the
// foreground on the step's writable rootfs, with no network (or, when
// step.Network is set, in the network the node's egress made for it),
// the step's limits in a cgroup of its own, and its output copied to
// step.Output. The sandbox is gone when it returns.
func (b *Backend) RunBuildStep(ctx context.Context, step airlock.BuildStep) (int, error) {
	if !validID.MatchString(step.ID) {
		return -1, fmt.Errorf("gvisor: invalid build step id %q", step.ID)
	}
	if len(step.Args) == 0 || step.Rootfs == "" || !filepath.IsAbs(step.Cwd) {
		return -1, fmt.Errorf("gvisor: build step %s needs a program, a rootfs and an absolute working directory", step.ID)
	}
	if step.Limits.MemoryBytes <= 0 || step.Limits.Pids <= 0 {
		return -1, fmt.Errorf("gvisor: build step %s needs memory and process limits", step.ID)
	}
	rootfs, err := filepath.EvalSymlinks(step.Rootfs)
	if err != nil {
		return -1, fmt.Errorf("gvisor: build step %s: %w", step.ID, err)
	}
	dir := filepath.Join(b.cfg.buildsDir(), step.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return -1, fmt.Errorf("gvisor: %w", err)
	}
	cgroup := b.cgroupPath("build-" + step.ID)
	defer func() {
		b.cgroups.Kill(cgroup)
		b.runsc(context.WithoutCancel(ctx), "delete", "--force", step.ID)
		b.cgroups.Remove(cgroup)
		os.RemoveAll(dir)
	}()
	if err := b.cgroups.Create(cgroup, cgroups.Limits{
		MemoryBytes: step.Limits.MemoryBytes,
		CPUs:        step.Limits.CPUs,
		Pids:        hostPidsBackstop,
	}); err != nil {
		return -1, err
	}
	spec := buildSpec(step, rootfs, cgroup)
	if err := applyNetwork(spec, step.Network, dir); err != nil {
		return -1, err
	}
	if err := writeBundle(dir, spec); err != nil {
		return -1, err
	}
	if step.Limits.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, step.Limits.Timeout)
		defer cancel()
	}
	out := step.Output
	if out == nil {
		out = io.Discard
	}
	args := append(append(b.globalFlags(), networkFlags(step.Network)...), "run", "--bundle", dir, step.ID)
	cmd := exec.Command(b.cfg.Runsc, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("gvisor: runsc: %w", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		// Kill through the cgroup (the sandbox, its gofer and stubs),
		// then runsc itself.
		b.cgroups.Kill(cgroup)
		b.runsc(context.WithoutCancel(ctx), "kill", "--all", step.ID, "KILL")
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-waited
		}
		return -1, fmt.Errorf("gvisor: build step %s: %w", step.ID, ctx.Err())
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return -1, fmt.Errorf("gvisor: build step %s: %w", step.ID, err)
	}
	return 0, nil
}

// buildSpec is the OCI spec of a build step: the rootfs read-write, no
// /workspace or /tmp mounts (they are part of the image being built),
// and Docker's capabilities for a root step.
func buildSpec(step airlock.BuildStep, rootfs, cgroup string) *specs.Spec {
	caps := []string{}
	if step.UID == 0 {
		caps = buildCaps
	}
	nproc := uint64(step.Limits.Pids)
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "noexec", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
	}
	// runsc puts a tmpfs over /tmp unless the spec mounts something
	// there: what a step writes to /tmp belongs to the image, so /tmp is
	// the rootfs's own, bound when it is a real directory (never a
	// symlink, which the host would follow). No step runs meanwhile.
	if fi, err := os.Lstat(filepath.Join(rootfs, "tmp")); err == nil && fi.IsDir() {
		mounts = append(mounts, specs.Mount{Destination: "/tmp", Type: "bind", Source: filepath.Join(rootfs, "tmp"),
			Options: []string{"rbind", "rw", "nosuid", "nodev"}})
	}
	return &specs.Spec{
		Version:  specs.Version,
		Hostname: "build",
		Root:     &specs.Root{Path: rootfs, Readonly: false},
		Process: &specs.Process{
			User: specs.User{UID: step.UID, GID: step.GID},
			Args: step.Args,
			Env:  step.Env,
			Cwd:  step.Cwd,
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps, Inheritable: []string{}, Ambient: []string{},
			},
			NoNewPrivileges: step.UID != 0,
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NPROC", Hard: nproc, Soft: nproc},
				{Type: "RLIMIT_NOFILE", Hard: maxOpenFiles, Soft: maxOpenFiles},
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
			},
		},
		Mounts: mounts,
		Linux:  sandboxLinux(cgroup, step.Limits),
	}
}
