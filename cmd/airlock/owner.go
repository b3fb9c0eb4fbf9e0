package main

import (
	"os"
	"path/filepath"
	"strconv"
)

// invoker returns the user who ran this command through sudo: a root
// process with SUDO_UID and SUDO_GID set. Files that a client command
// writes for the user (--out artifacts, cp downloads, repl figures) are
// given to them, so that they do not end up owned by root. (With a
// profile from 'airlock login' the client commands need no sudo at all.)
func invoker() (uid, gid int, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	u, err1 := strconv.Atoi(os.Getenv("SUDO_UID"))
	g, err2 := strconv.Atoi(os.Getenv("SUDO_GID"))
	if err1 != nil || err2 != nil || u <= 0 || g < 0 {
		return 0, 0, false
	}
	return u, g, true
}

// giveToInvoker hands path to the user who ran sudo, if there is one; it
// never follows a symlink.
func giveToInvoker(path string) error {
	uid, gid, ok := invoker()
	if !ok {
		return nil
	}
	return os.Lchown(path, uid, gid)
}

// mkdirForInvoker makes dir (and its parents) like os.MkdirAll, giving
// each directory it made to the user who ran sudo.
func mkdirForInvoker(dir string, perm os.FileMode) error {
	var made []string
	for d := dir; ; d = parentDir(d) {
		if _, err := os.Lstat(d); err == nil || d == parentDir(d) {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	for _, d := range made {
		if err := giveToInvoker(d); err != nil {
			return err
		}
	}
	return nil
}

func parentDir(d string) string { return filepath.Dir(filepath.Clean(d)) }
