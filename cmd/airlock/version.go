package main

import (
	"context"
	"fmt"
	"os"

	"github.com/airlockhq/airlock/internal/version"
)

// `airlock --version` (or `airlock version`) prints the build's version,
// stamped by scripts/release.sh.
func init() {
	register("version", "print the version of this build", func(context.Context, []string) error {
		fmt.Println(version.Line("airlock"))
		return nil
	})
	if version.IsFlag(os.Args[1:]) {
		fmt.Println(version.Line("airlock"))
		os.Exit(0)
	}
}
