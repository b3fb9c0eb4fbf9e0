//go:build linux && !amd64 && !arm64

package nsinit

import (
	"fmt"
	"runtime"
)

func installSeccomp() error {
	return fmt.Errorf("seccomp: no syscall table for %s", runtime.GOARCH)
}
