package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/airlockhq/airlock/client"
)

const cpUsage = `usage: airlock cp SRC DST

Copies a file between this machine and a session, streaming it. One of
SRC and DST is SESSION:PATH (PATH relative to /workspace, or absolute under
/workspace or /tmp); the other a local path, or - for stdin or stdout.

  airlock cp data.csv $S:data.csv      upload
  airlock cp data.csv $S:in/           upload into a directory (made if missing)
  airlock cp $S:out/chart.png .        download into the current directory
  airlock cp $S:report.txt -           print a file

An upload replaces the session's file only once it is complete; a download
is written to a temporary file next to the destination and renamed into
place once complete, so an interrupted copy leaves no partial file on
either side. A local name with a colon can be given as ./name.

flags:
  --url URL, --key KEY  server and API key (see airlock session -h)
`

var remoteSpec = regexp.MustCompile(`^([A-Za-z0-9_-]{1,64}):(.*)$`)

// splitRemote splits SESSION:PATH; ok is false for a local path.
func splitRemote(arg string) (id, p string, ok bool) {
	m := remoteSpec.FindStringSubmatch(arg)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

func runCp(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("cp", cpUsage, std.err)
	var srv serverFlags
	srv.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 2 {
		return usageError(std.err, "cp", "want SRC and DST")
	}
	srcID, srcPath, srcRemote := splitRemote(pos[0])
	dstID, dstPath, dstRemote := splitRemote(pos[1])
	switch {
	case srcRemote == dstRemote:
		return usageError(std.err, "cp", "exactly one of SRC and DST must be SESSION:PATH")
	case srcRemote && srcPath == "":
		return usageError(std.err, "cp", "give the file's PATH after SESSION:")
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	if dstRemote {
		return upload(ctx, c, std, &srv, pos[0], dstID, dstPath)
	}
	return download(ctx, c, std, &srv, srcID, srcPath, pos[1])
}

// upload copies a local file (or stdin) into the session.
func upload(ctx context.Context, c *client.Client, std stdio, srv *serverFlags, local, id, remote string) error {
	var r io.Reader = std.in
	size := int64(-1)
	name := "stdin"
	if local != "-" {
		f, err := os.Open(local)
		if err != nil {
			fmt.Fprintf(std.err, "airlock: %v\n", err)
			return exitError{1}
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			fmt.Fprintf(std.err, "airlock: %s is not a regular file\n", local)
			return exitError{1}
		}
		r, size, name = f, fi.Size(), filepath.Base(local)
	}
	if remote == "" || strings.HasSuffix(remote, "/") {
		if local == "-" {
			return usageError(std.err, "cp", "stdin has no name: give the file's PATH after SESSION:")
		}
		remote += name
	}
	res, err := c.PutFile(ctx, id, remote, r, size)
	if err != nil {
		return apiFailed(std, err, srv)
	}
	fmt.Fprintf(std.err, "airlock: %s -> %s:%s (%d bytes)\n", printableText(local), id, printableText(res.Path), res.Size)
	return nil
}

// download copies a file of the session to a local path (or stdout).
func download(ctx context.Context, c *client.Client, std stdio, srv *serverFlags, id, remote, local string) error {
	if local == "-" {
		if _, err := c.GetFile(ctx, id, remote, std.out); err != nil {
			return apiFailed(std, err, srv)
		}
		return nil
	}
	base := path.Base(remote)
	if fi, err := os.Stat(local); err == nil && fi.IsDir() || strings.HasSuffix(local, string(filepath.Separator)) {
		if base == "." || base == "/" || base == ".." {
			return usageError(std.err, "cp", "%s names no file", remote)
		}
		local = filepath.Join(local, base)
	}
	dir := filepath.Dir(local)
	tmp, err := os.CreateTemp(dir, ".airlock-cp-*")
	if err != nil {
		fmt.Fprintf(std.err, "airlock: %v\n", err)
		return exitError{1}
	}
	n, err := c.GetFile(ctx, id, remote, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = giveToInvoker(tmp.Name())
	}
	if err == nil {
		err = os.Rename(tmp.Name(), local)
	}
	if err != nil {
		os.Remove(tmp.Name())
		var pe *fs.PathError
		if errors.As(err, &pe) {
			fmt.Fprintf(std.err, "airlock: %v\n", err)
			return exitError{1}
		}
		return apiFailed(std, err, srv)
	}
	fmt.Fprintf(std.err, "airlock: %s:%s -> %s (%d bytes)\n", id, printableText(remote), local, n)
	return nil
}
