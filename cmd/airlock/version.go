package main

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock/internal/version"
)

const versionUsage = `usage: airlock version   (or airlock --version)

Prints the version of this build, stamped by scripts/release.sh.
`

func runVersion(_ context.Context, args []string, std stdio) error {
	if len(args) > 0 {
		return errUsage("version", "version takes no arguments")
	}
	fmt.Fprintln(std.out, version.Line("airlock"))
	return nil
}
