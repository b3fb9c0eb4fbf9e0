package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// DefaultDir is where named namespaces are bind-mounted; `ip netns` looks
// there too.
const DefaultDir = "/run/netns"

// prepareDir makes dir a shared mount point, as iproute2 does, so that a
// namespace mounted in it is seen by processes in other mount namespaces.
func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) {
		// Not a mount point yet: bind it onto itself first.
		if err := unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("netns: bind %s: %w", dir, err)
		}
		err = unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	}
	if err != nil {
		return fmt.Errorf("netns: make %s shared: %w", dir, err)
	}
	return nil
}

// NewNamed makes a new network namespace and bind-mounts it at dir/name.
// The calling goroutine's namespace is not changed.
func NewNamed(dir, name string) (string, error) {
	if name == "" || filepath.Base(name) != name {
		return "", fmt.Errorf("netns: bad name %q", name)
	}
	if err := prepareDir(dir); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return "", fmt.Errorf("netns: %w", err)
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		// A thread that cannot go back to the original namespace stays
		// locked and dies with this goroutine.
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			runtime.UnlockOSThread()
			return
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		merr := unix.Mount(src, path, "none", unix.MS_BIND, "")
		if err := vnetns.Set(orig); err != nil {
			errc <- errors.Join(merr, fmt.Errorf("return to the original namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- merr
	}()
	if err := <-errc; err != nil {
		os.Remove(path)
		return "", fmt.Errorf("netns: make %s: %w", name, err)
	}
	return path, nil
}

// DeleteNamed unmounts and removes a namespace made by NewNamed. The
// namespace itself (and the links in it) goes once nothing holds it.
func DeleteNamed(path string) error {
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netns: unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netns: %w", err)
	}
	return nil
}

// Do runs f on a thread that has joined the namespace at path. Sockets f
// opens stay in that namespace after it returns.
func Do(path string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		target, err := vnetns.GetFromPath(path)
		if err != nil {
			errc <- fmt.Errorf("netns: open %s: %w", path, err)
			runtime.UnlockOSThread()
			return
		}
		defer target.Close()
		if err := vnetns.Set(target); err != nil {
			errc <- fmt.Errorf("netns: enter %s: %w", path, err)
			runtime.UnlockOSThread()
			return
		}
		ferr := f()
		if err := vnetns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("netns: return from %s: %w", path, err))
			return // the thread stays locked and is thrown away
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// writeSysctl writes a value under /proc/sys of the calling thread's
// network namespace.
func writeSysctl(key, value string) error {
	p := filepath.Join("/proc/sys", key)
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("netns: sysctl %s: %w", key, err)
	}
	return nil
}
