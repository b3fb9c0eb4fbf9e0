package loopdisk

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// FormatVolume creates image (which must not exist) as a sparse file of
// sizeBytes formatted as ext4 with a journal (a volume's data outlives
// sandboxes, so a host crash must not leave it to fsck) and its root
// directory owned by uid:gid. Unlike Format, which makes scratch disks,
// the image is for keeping.
func FormatVolume(ctx context.Context, image string, sizeBytes int64, uid, gid int) error {
	f, err := os.OpenFile(image, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("loopdisk: volume image: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(sizeBytes); err != nil {
		return fmt.Errorf("loopdisk: volume image: %w", err)
	}
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F",
		"-E", fmt.Sprintf("lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=%d:%d", uid, gid),
		"-N", strconv.FormatInt(Inodes(sizeBytes), 10), "-m", "0", image).CombinedOutput()
	if err != nil {
		return fmt.Errorf("loopdisk: mkfs.ext4: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Attached reports whether image is the backing file of a loop device
// now: mounted, or still held by a lazily detached mount. Mounting an
// image that is attached already would mount one ext4 twice.
func Attached(image string) (bool, error) {
	abs, err := filepath.Abs(image)
	if err != nil {
		return false, err
	}
	files, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return false, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // detached meanwhile
		}
		if strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") == abs {
			return true, nil
		}
	}
	return false, nil
}
