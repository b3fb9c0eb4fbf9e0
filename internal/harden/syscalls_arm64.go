//go:build linux

package harden

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_AARCH64

// x32Bit is zero: arm64 has no second ABI under the same audit
// architecture (32-bit arm has its own and is refused).
const x32Bit = 0

var archAllowed = []uintptr{}

var archDenied = []uintptr{}
