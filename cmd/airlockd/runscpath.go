package main

import (
	"os"
	"path/filepath"
)

// A release installs runsc next to airlockd (PREFIX/bin, see
// scripts/install.sh): when it is there, that directory goes first on
// PATH, so airlockd and everything it starts use the runsc it shipped
// with, wherever the prefix is.
func init() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	dir := filepath.Dir(exe)
	if fi, err := os.Stat(filepath.Join(dir, "runsc")); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return
	}
	os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}
