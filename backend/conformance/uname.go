package conformance

import "golang.org/x/sys/unix"

type unixUtsname = unix.Utsname

// hostUname returns the host kernel's release.
func hostUname(u *unix.Utsname) string {
	if unix.Uname(u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
