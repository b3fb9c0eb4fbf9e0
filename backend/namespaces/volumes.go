package namespaces

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/backend/namespaces/nsinit"
)

// Volumes.
//
// A volume's host mount (made by the node) holds files of the sandbox
// user as the host knows it: uid 1000, which gVisor's sandboxes run as.
// A namespaces sandbox runs uid 1000 of its own user namespace, mapped
// to a host uid of its own, so the host mount itself would show it the
// volume's files as nobody's. Each volume is therefore given to the
// sandbox as an idmapped mount (open_tree, mount_setattr with the
// sandbox's user namespace, move_mount): the files of uid 1000 on the
// volume's disk are the sandbox user's inside, and what the sandbox
// writes is stored as uid 1000, so the same volume reads the same under
// either backend. The mount is made nosuid and nodev, and read-only for
// a reader, on the host, in the sandbox's run directory
// (volumes/<index>), before the init stage builds its root: the run
// directory is below the backend's shared state directory, so the mount
// reaches the init stage's copy of the host's mounts, and the init stage
// binds it at the path the session asked for (nsinit.Volume), where its
// flags are locked (the sandbox cannot remount a reader's mount
// read-write). Landlock lets a writer make files there.

// volumesDir is where a sandbox's volume mounts are made on the host.
func (s *Sandbox) volumesDir() string { return filepath.Join(s.dir, "volumes") }

// mountVolumes makes the idmapped mounts of the spec's volumes and the
// mount points of those below /workspace or /tmp (on the sandbox's fresh
// disk, owned by its user), and returns what the init stage binds.
func (s *Sandbox) mountVolumes(spec airlock.SandboxSpec, workspace, tmp string) ([]nsinit.Volume, error) {
	if len(spec.Volumes) == 0 {
		return nil, nil
	}
	userns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", s.cmd.Process.Pid))
	if err != nil {
		return nil, fmt.Errorf("namespaces: the sandbox's user namespace: %w", err)
	}
	defer userns.Close()
	if err := os.Mkdir(s.volumesDir(), 0o700); err != nil {
		return nil, fmt.Errorf("namespaces: %w", err)
	}
	out := make([]nsinit.Volume, 0, len(spec.Volumes))
	for i, v := range spec.Volumes {
		if err := s.volumeMountPoint(spec, v, workspace, tmp); err != nil {
			return nil, err
		}
		at := filepath.Join(s.volumesDir(), strconv.Itoa(i))
		if err := os.Mkdir(at, 0o700); err != nil {
			return nil, fmt.Errorf("namespaces: %w", err)
		}
		if err := idmappedMount(v.HostDir, at, int(userns.Fd()), v.ReadOnly); err != nil {
			return nil, fmt.Errorf("namespaces: volume at %s: %w", v.Path, err)
		}
		out = append(out, nsinit.Volume{Source: at, Target: v.Path, ReadOnly: v.ReadOnly})
	}
	return out, nil
}

// idmappedMount mounts a copy of the mount at src at dst, its owners
// mapped through the user namespace usernsFD, nosuid, nodev, and
// read-only if asked.
func idmappedMount(src, dst string, usernsFD int, readOnly bool) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.O_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open_tree %s: %w", src, err)
	}
	defer unix.Close(fd)
	attr := &unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(usernsFD),
	}
	if readOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return fmt.Errorf("mount_setattr (idmap): %w", err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount to %s: %w", dst, err)
	}
	return nil
}

// volumeMountPoint makes the mount point of a volume below /workspace
// or /tmp on the sandbox's fresh disk (nothing the sandbox made is on it
// yet: no link to follow), owned by the sandbox's user; any other path
// must be a directory of the image, which is never written.
func (s *Sandbox) volumeMountPoint(spec airlock.SandboxSpec, v airlock.SandboxVolume, workspace, tmp string) error {
	if err := airlock.ValidateVolumePath(v.Path); err != nil {
		return fmt.Errorf("namespaces: %w", err)
	}
	var base, rel string
	switch {
	case strings.HasPrefix(v.Path, "/workspace/"):
		base, rel = workspace, strings.TrimPrefix(v.Path, "/workspace/")
	case strings.HasPrefix(v.Path, "/tmp/"):
		base, rel = tmp, strings.TrimPrefix(v.Path, "/tmp/")
	default:
		if err := airlock.CheckVolumeMountPoint(spec.Image.Rootfs, v.Path); err != nil {
			return fmt.Errorf("namespaces: %w", err)
		}
		return nil
	}
	dir := base
	for _, part := range strings.Split(rel, "/") {
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("namespaces: volume mount point: %w", err)
		}
		if err := os.Lchown(dir, s.uid, s.uid); err != nil {
			return fmt.Errorf("namespaces: volume mount point: %w", err)
		}
	}
	return nil
}

// unmountVolumes detaches the sandbox's volume mounts on the host and
// removes their directories, before anything of the run directory is
// removed: a mount still there would have the volume's files deleted
// with it.
func (s *Sandbox) unmountVolumes() error {
	if s.dir == "" {
		return nil
	}
	entries, err := os.ReadDir(s.volumesDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(s.volumesDir(), e.Name())
		for {
			err := unix.Unmount(p, unix.MNT_DETACH)
			if err != nil {
				if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
					errs = append(errs, fmt.Errorf("namespaces: unmount volume %s: %w", p, err))
				}
				break // EINVAL: no mount (left) there
			}
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("namespaces: %w", err))
		}
	}
	if len(errs) == 0 {
		if err := os.Remove(s.volumesDir()); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
