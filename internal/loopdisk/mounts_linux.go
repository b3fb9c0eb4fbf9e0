package loopdisk

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/internal/mountinfo"
)

// UnmountAll unmounts every mount at or below dir, deepest first.
func UnmountAll(dir string) error {
	mounts, err := MountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for i := len(mounts) - 1; i >= 0; i-- {
		m := mounts[i]
		if err := unix.Unmount(m, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			if err2 := unix.Unmount(m, unix.MNT_DETACH); err2 != nil {
				errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
			}
		}
	}
	return errors.Join(errs...)
}

// MountsUnder lists mount points at or below dir in this process's mount
// namespace, in mount order.
func MountsUnder(dir string) ([]string, error) {
	ms, err := mountinfo.Self()
	if err != nil {
		return nil, err
	}
	return mountinfo.Under(ms, dir), nil
}
