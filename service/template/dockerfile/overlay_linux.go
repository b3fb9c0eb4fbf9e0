package dockerfile

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// maxOverlayOptions is the longest overlay option string the classic
// mount(2) call takes (one page, less a margin).
const maxOverlayOptions = 4000

// mountOverlay mounts at merged an overlay of lowers (the topmost
// first) with a writable upper directory. Redirects, the index and
// metadata-only copy-up are off, so that upper holds whole files and
// plain whiteouts: a layer can then be applied without the overlay.
func mountOverlay(lowers []string, upper, work, merged string) error {
	for _, p := range append(append([]string{}, lowers...), upper, work) {
		if strings.ContainsAny(p, ",:\\") {
			return fmt.Errorf("overlay: path %q holds a character overlay options cannot carry", p)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,redirect_dir=off,index=off,metacopy=off,xino=off",
		strings.Join(lowers, ":"), upper, work)
	if len(opts) > maxOverlayOptions {
		return fmt.Errorf("%w: the build has too many layers for one overlay mount", ErrTooLarge)
	}
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("overlay mount: %w", err)
	}
	return nil
}

// unmount unmounts merged, lazily if it is still busy.
func unmount(merged string) error {
	if err := unix.Unmount(merged, 0); err != nil {
		if err := unix.Unmount(merged, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("overlay unmount %s: %w", merged, err)
		}
	}
	return nil
}

// isWhiteout reports whether a layer entry is an overlay whiteout (a
// character device 0/0).
func isWhiteout(mode uint32, rdev uint64) bool {
	return mode&unix.S_IFMT == unix.S_IFCHR && rdev == 0
}

// isOpaque reports whether a layer directory hides what lies below it.
func isOpaque(dir string) bool {
	buf := make([]byte, 8)
	n, err := unix.Lgetxattr(dir, "trusted.overlay.opaque", buf)
	return err == nil && n == 1 && buf[0] == 'y'
}
