package gvisor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/airlockhq/airlock"
)

// SandboxUID is the unprivileged user every sandbox process runs as.
const SandboxUID = 1000

// maxOpenFiles is RLIMIT_NOFILE inside the sandbox.
const maxOpenFiles = 4096

// hostPidsBackstop bounds host tasks of one sandbox (the sentry, gofer and
// systrap stubs). The sandbox's own process limit is RLIMIT_NPROC, which
// the gVisor kernel enforces; hitting this backstop ends the sandbox.
const hostPidsBackstop = 4096

// ociSpec builds the OCI runtime spec of a sandbox.
func ociSpec(cfg *Config, spec airlock.SandboxSpec, cgroupPath, workspaceDir, tmpDir, channelDir string) *specs.Spec {
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/workspace",
		"LANG=C.UTF-8",
		"USER=sandbox",
		"TMPDIR=/tmp",
	}
	env = append(env, spec.Image.Env...)
	nproc := uint64(spec.Limits.Pids)
	noCaps := &specs.LinuxCapabilities{
		Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}, Ambient: []string{},
	}
	s := &specs.Spec{
		Version:  specs.Version,
		Hostname: "sandbox",
		Root:     &specs.Root{Path: spec.Image.Rootfs, Readonly: true},
		Process: &specs.Process{
			Terminal:        false,
			User:            specs.User{UID: SandboxUID, GID: SandboxUID},
			Args:            []string{cfg.AgentPath},
			Env:             env,
			Cwd:             "/workspace",
			Capabilities:    noCaps,
			NoNewPrivileges: true,
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NPROC", Hard: nproc, Soft: nproc},
				{Type: "RLIMIT_NOFILE", Hard: maxOpenFiles, Soft: maxOpenFiles},
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
			},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "noexec", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/workspace", Type: "bind", Source: workspaceDir, Options: []string{"rbind", "rw", "nosuid", "nodev"}},
			{Destination: "/tmp", Type: "bind", Source: tmpDir, Options: []string{"rbind", "rw", "nosuid", "nodev"}},
			// The agent's channel for the next airlockd (channel.go).
			{Destination: ChannelDir, Type: "bind", Source: channelDir, Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"}},
		},
		Linux:       sandboxLinux(cgroupPath, spec.Limits),
		Annotations: spec.Labels,
	}
	// The session's volumes: host mounts of their disks, bound in after
	// the workspace (a volume may sit below /workspace).
	for _, v := range spec.Volumes {
		opts := []string{"rbind", "rw", "nosuid", "nodev"}
		if v.ReadOnly {
			opts[1] = "ro"
		}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: v.Path, Type: "bind", Source: v.HostDir, Options: opts})
	}
	return s
}

// writeBundle writes config.json into dir.
func writeBundle(dir string, s *specs.Spec) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		return fmt.Errorf("gvisor: write bundle: %w", err)
	}
	return nil
}

// sandboxLinux is the Linux part of a sandbox's OCI spec, for a sandbox
// and for a build step alike: its cgroup, the limits the host enforces
// (memory without swap beyond it, CPU as a quota of 100 ms periods when
// CPUs is set, the host's pids backstop; the program's own pids bound is
// RLIMIT_NPROC inside) and its own namespaces.
func sandboxLinux(cgroupPath string, lim airlock.Limits) *specs.Linux {
	mem := lim.MemoryBytes
	var quota *int64
	var period *uint64
	if lim.CPUs > 0 {
		p := uint64(100000)
		q := int64(lim.CPUs * float64(p))
		quota, period = &q, &p
	}
	pids := int64(hostPidsBackstop)
	return &specs.Linux{
		CgroupsPath: "/" + cgroupPath,
		Resources: &specs.LinuxResources{
			Memory: &specs.LinuxMemory{Limit: &mem, Swap: &mem},
			CPU:    &specs.LinuxCPU{Quota: quota, Period: period},
			Pids:   &specs.LinuxPids{Limit: pids},
		},
		Namespaces: []specs.LinuxNamespace{
			{Type: specs.PIDNamespace},
			{Type: specs.IPCNamespace},
			{Type: specs.UTSNamespace},
			{Type: specs.MountNamespace},
			{Type: specs.NetworkNamespace},
		},
	}
}
