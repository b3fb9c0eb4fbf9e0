package main

import (
	"fmt"
	"os"

	"github.com/airlockhq/airlock/internal/version"
)

// `airlockd --version` prints the build's version (stamped by
// scripts/release.sh) and exits, before anything else runs.
func init() {
	if version.IsFlag(os.Args[1:]) {
		fmt.Println(version.Line("airlockd"))
		os.Exit(0)
	}
}
