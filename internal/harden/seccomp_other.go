//go:build linux && !amd64 && !arm64

package harden

import (
	"fmt"
	"runtime"
)

// InstallSeccomp fails: there is no syscall table for this architecture.
func InstallSeccomp() error {
	return fmt.Errorf("seccomp: no syscall table for %s", runtime.GOARCH)
}
