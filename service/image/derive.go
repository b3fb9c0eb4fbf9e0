package image

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// A derived stage (a spec with From) is made from its parent's stage
// instead of a debootstrap of its own:
//
//  1. a real copy of the parent's stage rootfs (cp -a, reflinked where the
//     filesystem can): dpkg and the packages' maintainer scripts write
//     into the copy, and a hard-link copy would let a file edited in
//     place change the parent's stage and every image made from it;
//  2. apt-get update and apt-get install of the packages the spec has
//     beyond its parent's, in a chroot of the copy, with the parent's
//     mirror (the recipe stripped apt's lists), no Recommends (as
//     debootstrap resolves only Depends) and a policy-rc.d that lets no
//     service start;
//  3. the recipe every stage gets (applyRecipe).
//
// The chroot's mounts (/proc, a /dev and a /tmp of their own, the host's
// resolv.conf) live in a mount namespace of the installer's own and its
// processes in a PID namespace of their own (unshare): when the installer
// ends, however it ends, the kernel drops the mounts and kills whatever a
// maintainer script left running. Nothing is mounted in the builder's
// namespace.

// installerScript runs as PID 1 of a new PID namespace, in a new mount
// namespace: $1 the rootfs, $2 the mirror, $3 the suite, then the
// packages to install.
const installerScript = `set -eu
root=$1 mirror=$2 suite=$3
shift 3
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
# A /dev of its own with the usual nodes, whatever the copy's /dev holds
# (debootstrap in a container leaves it empty).
mount -t tmpfs -o nosuid,noexec,mode=0755 airlock-dev "$root/dev"
for n in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
	mm=${n#*:}
	mknod -m 0666 "$root/dev/${n%%:*}" c "${mm%:*}" "${mm#*:}"
done
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
mkdir "$root/dev/pts" "$root/dev/shm"
mount -t tmpfs -o nosuid,nodev,mode=1777 airlock-derive "$root/tmp"
mount --bind /etc/resolv.conf "$root/etc/resolv.conf"
mount -o remount,bind,ro "$root/etc/resolv.conf"
printf 'deb %s %s main\n' "$mirror" "$suite" >"$root/tmp/airlock-sources.list"
mkdir "$root/tmp/airlock-sources.d"
apt() {
	chroot "$root" apt-get -q -o Dpkg::Use-Pty=0 \
		-o APT::Install-Recommends=false -o APT::Install-Suggests=false \
		-o Dir::Etc::SourceList=/tmp/airlock-sources.list \
		-o Dir::Etc::SourceParts=/tmp/airlock-sources.d "$@"
}
apt update
apt install -y --no-install-recommends "$@"
`

// policyRCD is /usr/sbin/policy-rc.d while a derived stage's packages are
// installed: invoke-rc.d starts no service (101: action forbidden).
const policyRCD = "#!/bin/sh\n# Written by the airlock image builder while it installs packages: no service starts.\nexit 101\n"

// deriveStage fills rootfs (which must not exist) from the parent's stage
// rootfs and installs the packages spec has beyond parent's with mirror.
func (b *Builder) deriveStage(ctx context.Context, bl *build, spec, parent airlock.ImageSpec, parentRootfs, rootfs, mirror string) error {
	extra := extraPackages(spec, parent)
	t0 := time.Now()
	bl.step("copy the stage of %s (a real copy: the packages' scripts must not write into the parent's files)", parent.Name)
	if err := run(ctx, nil, "cp", "-a", "--reflink=auto", parentRootfs, rootfs); err != nil {
		return err
	}
	bl.step("copied in %.1fs", time.Since(t0).Seconds())
	if len(extra) == 0 {
		bl.step("no packages beyond %s's", parent.Name)
		return nil
	}

	// The recipe left resolv.conf an empty file; the installer mounts
	// the host's over it, which needs a file, never a symlink out of the
	// tree. hostFiles empties it again afterwards.
	resolv := filepath.Join(rootfs, "etc/resolv.conf")
	if err := os.Remove(resolv); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(resolv, nil, 0o644); err != nil {
		return err
	}
	policy := filepath.Join(rootfs, "usr/sbin/policy-rc.d")
	if fileExists(policy) {
		return fmt.Errorf("derive %s: the parent's stage has a %s", spec.Name, "/usr/sbin/policy-rc.d")
	}
	if err := os.MkdirAll(filepath.Dir(policy), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(policy, []byte(policyRCD), 0o755); err != nil {
		return err
	}
	defer os.Remove(policy)

	bl.step("apt-get install %d packages from %s: %s (this takes a minute or more)", len(extra), mirror, strings.Join(extra, " "))
	t1 := time.Now()
	if err := b.install(ctx, spec, rootfs, mirror, extra); err != nil {
		return err
	}
	bl.step("apt-get done in %.1fs", time.Since(t1).Seconds())
	if err := os.Remove(policy); err != nil {
		return err
	}
	// The mounts were the installer's namespace's; make sure.
	if mps, err := mountsUnder(rootfs); err != nil || len(mps) > 0 {
		return fmt.Errorf("derive %s: still mounted after the install: %v (%v)", spec.Name, mps, err)
	}
	return nil
}

// install runs the installer (Config.Installer, else installerScript in
// namespaces of its own) for rootfs, streaming its output to the progress
// writer, as debootstrap's (runInstaller).
func (b *Builder) install(ctx context.Context, spec airlock.ImageSpec, rootfs, mirror string, pkgs []string) error {
	args := append([]string{rootfs, mirror, spec.Suite}, pkgs...)
	var cmd *exec.Cmd
	if b.cfg.Installer != "" {
		cmd = exec.CommandContext(ctx, b.cfg.Installer, args...)
	} else {
		// --kill-child: if unshare dies, the namespace's first process
		// gets SIGKILL, and with it every process in the namespace.
		cmd = exec.CommandContext(ctx, "unshare", append([]string{
			"--mount", "--propagation", "private", "--pid", "--fork", "--kill-child",
			"/bin/sh", "-c", installerScript, "airlock-derive"}, args...)...)
	}
	return b.runInstaller(ctx, cmd, "  apt| ", "install the packages of "+spec.Name, "DEBCONF_NONINTERACTIVE_SEEN=true")
}

// deriveMirror returns the mirror a derived stage installs from: the
// configured one, else the one the parent's stage was made with.
func (b *Builder) deriveMirror(parentDir string) (string, error) {
	mirror := b.cfg.Mirror
	if mirror == "" {
		info, err := readStageInfo(parentDir)
		if err != nil {
			return "", err
		}
		mirror = info.Mirror
	}
	if !usableMirror(mirror) {
		return "", fmt.Errorf("the parent stage's mirror %q is not an http, https, ftp or file URL", mirror)
	}
	if u, _ := url.Parse(mirror); u.Scheme == "file" {
		return "", fmt.Errorf("mirror %s: a derived stage installs with apt-get in a chroot, which cannot see a file: mirror; pass an http mirror (--mirror)", mirror)
	}
	return mirror, nil
}
