package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/secretscan"
)

// FinishConfig configures Finish.
type FinishConfig struct {
	// Name names the image in progress lines and refusals.
	Name string
	// AgentPath is the static airlock-agent binary to install.
	AgentPath string
	// Secrets scans the rootfs; nil is secretscan.Default().
	Secrets *secretscan.Scanner
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
}

// Finished is what Finish did.
type Finished struct {
	AgentSHA256 string      `json:"agent_sha256"`
	SizeBytes   int64       `json:"size_bytes"`
	SecretScan  *SecretScan `json:"secret_scan"`
}

// ProblemUnsafeRootfs is the problem type of a foreign rootfs that the
// finishing steps refuse to write into (a path they write goes through a
// symbolic link, which could lead out of the rootfs).
const ProblemUnsafeRootfs = "template-rootfs-unsafe"

// finishPaths are the paths Finish writes, relative to the rootfs: none of
// their components may be a symbolic link.
var finishPaths = []string{
	"etc/hostname", "etc/hosts", "etc/resolv.conf", "etc/machine-id",
	"etc/passwd", "etc/group", "etc/shadow", "etc/gshadow",
	strings.TrimPrefix(AgentPath, "/"), strings.TrimPrefix(ChannelDir, "/"),
	strings.TrimPrefix(Workspace, "/"), "tmp", "home/user",
}

// replaced are the finishPaths that are removed before they are written:
// they may be links.
var replaced = map[string]bool{"etc/hostname": true, "etc/hosts": true, "etc/resolv.conf": true, "etc/machine-id": true, "home/user": true}

// Finish turns a rootfs that came from elsewhere (an OCI image, a
// Dockerfile build, a session) into one of ours the way Builder finishes
// a debootstrap stage: host identity files, the sandbox user, /workspace
// and /tmp, the agent and the agent's channel directory, /home/user; then
// it scans the tree for credentials and refuses it if it holds one (an
// *airlock.Error of type secret-in-image). The rootfs is the caller's
// directory, not yet published; Finish never follows a symbolic link out
// of it (a path it would write through one is refused).
func Finish(ctx context.Context, cfg FinishConfig, rootfs string) (*Finished, error) {
	if cfg.AgentPath == "" {
		return nil, errors.New("finish: no agent binary")
	}
	if err := checkStaticELF(cfg.AgentPath); err != nil {
		return nil, fmt.Errorf("finish: agent: %w", err)
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.Secrets == nil {
		cfg.Secrets = secretscan.Default()
	}
	bl := &build{b: &Builder{cfg: Config{Progress: cfg.Progress, Secrets: cfg.Secrets}}, name: cfg.Name, start: time.Now()}
	for _, p := range finishPaths {
		if err := noSymlinkOnPath(rootfs, p, replaced[p]); err != nil {
			return nil, err
		}
	}
	bl.step("host identity files, sandbox user (uid %d) and directories", SandboxUID)
	if err := os.MkdirAll(filepath.Join(rootfs, "etc"), 0o755); err != nil { // an image may have none
		return nil, err
	}
	if err := hostFiles(rootfs); err != nil {
		return nil, err
	}
	if err := addSandboxUser(rootfs); err != nil {
		return nil, err
	}
	if err := makeDirs(rootfs); err != nil {
		return nil, err
	}
	agentSum, err := FileSHA256(cfg.AgentPath)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	bl.step("install agent %s (sha256 %s)", AgentPath, Short(agentSum))
	if err := installAgent(cfg.AgentPath, rootfs, agentSum); err != nil {
		return nil, err
	}
	scan, err := bl.b.scanRootfs(ctx, bl, cfg.Name, rootfs)
	if err != nil {
		return nil, err
	}
	size, err := DirSize(rootfs)
	if err != nil {
		return nil, fmt.Errorf("size of %s: %w", rootfs, err)
	}
	return &Finished{AgentSHA256: agentSum, SizeBytes: size, SecretScan: scan}, nil
}

// noSymlinkOnPath refuses rel if one of its components in rootfs is a
// symbolic link; the last one may be when lastMayLink (it is replaced,
// never written through). Missing components are fine: they are made as
// directories.
func noSymlinkOnPath(rootfs, rel string, lastMayLink bool) error {
	parts := strings.Split(rel, "/")
	p := rootfs
	for i, part := range parts {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		last := i == len(parts)-1
		if fi.Mode()&os.ModeSymlink != 0 && !(last && lastMayLink) {
			return airlock.Problem(airlock.EUNPROCESSABLE, ProblemUnsafeRootfs,
				"the image's /%s is a symbolic link; airlock writes /%s and does not write through links", strings.Join(parts[:i+1], "/"), rel)
		}
		if !last && fi.Mode()&os.ModeSymlink == 0 && !fi.IsDir() {
			return airlock.Problem(airlock.EUNPROCESSABLE, ProblemUnsafeRootfs,
				"the image's /%s is not a directory; airlock needs /%s", strings.Join(parts[:i+1], "/"), rel)
		}
	}
	return nil
}
