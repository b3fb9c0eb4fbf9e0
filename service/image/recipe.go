package image

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/airlockhq/airlock"
)

// Sandbox user created in every image.
const (
	SandboxUser = "sandbox"
	SandboxUID  = 1000
	SandboxGID  = 1000
	Workspace   = "/workspace"
)

// strippedDirs are emptied after debootstrap: package caches and lists
// (there is no apt in a sandbox's future) and documentation.
var strippedDirs = []string{
	"var/cache/apt",
	"var/lib/apt/lists",
	"usr/share/doc",
	"usr/share/man",
	"usr/share/info",
}

// keptLocales are the usr/share/locale entries that survive.
var keptLocales = []string{"C", "C.UTF-8", "C.utf8", "en_US", "en_US.UTF-8", "en_US.utf8"}

// applyRecipe turns debootstrap output into a sandbox rootfs: everything
// but the agent. It only depends on spec and RecipeVersion.
func applyRecipe(ctx context.Context, bl *build, spec airlock.ImageSpec, rootfs string) error {
	bl.step("strip caches, docs and locales")
	if err := strip(rootfs); err != nil {
		return err
	}
	bl.step("host identity files, sandbox user (uid %d) and directories", SandboxUID)
	if err := hostFiles(rootfs); err != nil {
		return err
	}
	if err := addSandboxUser(rootfs); err != nil {
		return err
	}
	if err := makeDirs(rootfs); err != nil {
		return err
	}
	if len(spec.Files) > 0 {
		bl.step("write %d files of the spec", len(spec.Files))
		if err := writeSpecFiles(rootfs, spec.Files); err != nil {
			return err
		}
	}
	if slices.Contains(spec.Packages, "python3-matplotlib") {
		backend := spec.Env["MPLBACKEND"]
		if backend == "" {
			backend = "Agg"
		}
		bl.step("write /etc/matplotlibrc (backend: %s)", backend)
		rc := "# Written by the airlock image builder: there is no display in a sandbox.\nbackend: " + backend + "\n"
		if err := os.WriteFile(filepath.Join(rootfs, "etc/matplotlibrc"), []byte(rc), 0o644); err != nil {
			return err
		}
	}
	if fileExists(filepath.Join(rootfs, "usr/bin/python3")) {
		bl.step("precompile Python modules")
		if err := compilePython(ctx, bl, rootfs); err != nil {
			return err
		}
	}
	// debootstrap removes its working directory on success; make sure.
	return os.RemoveAll(filepath.Join(rootfs, "debootstrap"))
}

// strip empties strippedDirs and drops unwanted locales.
func strip(rootfs string) error {
	for _, d := range strippedDirs {
		if err := removeContents(filepath.Join(rootfs, d), nil); err != nil {
			return err
		}
	}
	return removeContents(filepath.Join(rootfs, "usr/share/locale"), func(e os.DirEntry) bool {
		return !e.IsDir() || slices.Contains(keptLocales, e.Name())
	})
}

// removeContents removes the entries of dir for which keep is nil or false.
// A missing dir is fine.
func removeContents(dir string, keep func(os.DirEntry) bool) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if keep != nil && keep(e) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// hostFiles replaces what debootstrap copied from the build host
// (resolv.conf, hostname) so nothing about the host ends up in an image.
func hostFiles(rootfs string) error {
	files := map[string]string{
		"etc/hostname":    "sandbox\n",
		"etc/hosts":       "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"etc/resolv.conf": "",
	}
	for name, content := range files {
		p := filepath.Join(rootfs, name)
		os.Remove(p) // it may be a symlink; never write through one
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	// An empty machine-id; a runtime may generate one per sandbox.
	if p := filepath.Join(rootfs, "etc/machine-id"); fileExists(p) {
		os.Remove(p)
		if err := os.WriteFile(p, nil, 0o444); err != nil {
			return err
		}
	}
	return nil
}

// addSandboxUser appends the sandbox user and group to etc/passwd,
// etc/group, etc/shadow and etc/gshadow, unless already there.
func addSandboxUser(rootfs string) error {
	entries := []struct {
		file, line string
		required   bool
	}{
		{"etc/passwd", fmt.Sprintf("%s:x:%d:%d:Airlock sandbox:%s:/bin/bash", SandboxUser, SandboxUID, SandboxGID, Workspace), true},
		{"etc/group", fmt.Sprintf("%s:x:%d:", SandboxUser, SandboxGID), true},
		{"etc/shadow", SandboxUser + ":*:1:0:99999:7:::", true},
		{"etc/gshadow", SandboxUser + ":!::", false},
	}
	for _, e := range entries {
		p := filepath.Join(rootfs, e.file)
		if !fileExists(p) && !e.required {
			continue
		}
		if err := appendEntry(p, e.line); err != nil {
			return err
		}
	}
	return nil
}

// appendEntry appends line to a colon-separated database unless an entry
// of that name exists; it fails if another entry has the same id.
func appendEntry(path, line string) error {
	fields := strings.Split(line, ":")
	name, id := fields[0], ""
	if len(fields) > 2 && (strings.HasSuffix(path, "passwd") || strings.HasSuffix(path, "group")) {
		id = fields[2]
	}
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if f[0] == name {
			return nil
		}
		if id != "" && len(f) > 2 && f[2] == id {
			return fmt.Errorf("%s: id %s is already taken by %q", path, id, f[0])
		}
	}
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, mode)
	if err != nil {
		return err
	}
	prefix := ""
	if len(b) > 0 && b[len(b)-1] != '\n' {
		prefix = "\n"
	}
	_, err = f.WriteString(prefix + line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// makeDirs creates /workspace (the sandbox user's), /tmp (1777) and the
// agent's directory.
func makeDirs(rootfs string) error {
	dirs := []struct {
		path     string
		mode     os.FileMode
		uid, gid int
	}{
		{Workspace, 0o755, SandboxUID, SandboxGID},
		{"/tmp", 0o777 | os.ModeSticky, 0, 0},
		{filepath.Dir(AgentPath), 0o755, 0, 0},
	}
	for _, d := range dirs {
		p := filepath.Join(rootfs, d.path)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(p, d.mode); err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, d.uid, d.gid); err != nil {
				return err
			}
		}
	}
	return nil
}

// compilePython byte-compiles the Python modules in the rootfs, so that
// imports from the read-only rootfs need not compile anything. Failures
// to compile single files (Python 2 leftovers) are reported, not fatal.
func compilePython(ctx context.Context, bl *build, rootfs string) error {
	dirs := []string{}
	for _, pattern := range []string{"usr/lib/python3", "usr/lib/python3.[0-9]*"} {
		m, _ := filepath.Glob(filepath.Join(rootfs, pattern))
		for _, d := range m {
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				dirs = append(dirs, "/"+strings.TrimPrefix(d, rootfs+"/"))
			}
		}
	}
	if len(dirs) == 0 {
		return nil
	}
	args := append([]string{rootfs, "/usr/bin/python3", "-m", "compileall", "-q"}, dirs...)
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8", "HOME=/root"}
	if err := run(ctx, env, "chroot", args...); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		bl.step("warning: compileall reported errors (kept going): %v", err)
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
