package image

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Bounds of an image spec's files.
const (
	MaxSpecFileBytes  = 1 << 20
	MaxSpecFilesBytes = 16 << 20
	MaxSpecFiles      = 256
)

// reservedDirs are where a spec's files may not go: the sandbox's mounts
// and the agent's own directories.
var reservedDirs = []string{"/proc", "/sys", "/dev", "/run/airlock", "/opt/airlock", Workspace, "/tmp", HomeLink}

// checkSpecFiles reports the first file of a spec that cannot be written.
func checkSpecFiles(files map[string]string) error {
	if len(files) > MaxSpecFiles {
		return fmt.Errorf("%d files, more than %d", len(files), MaxSpecFiles)
	}
	total := 0
	for p, content := range files {
		if !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" || len(p) > 4096 || strings.ContainsRune(p, 0) {
			return fmt.Errorf("file path %q must be a clean absolute path", p)
		}
		for _, d := range reservedDirs {
			if p == d || strings.HasPrefix(p, d+"/") {
				return fmt.Errorf("file %s: nothing may be written under %s", p, d)
			}
		}
		if len(content) > MaxSpecFileBytes {
			return fmt.Errorf("file %s is %d bytes, more than %d", p, len(content), MaxSpecFileBytes)
		}
		total += len(content)
	}
	if total > MaxSpecFilesBytes {
		return fmt.Errorf("files total %d bytes, more than %d", total, MaxSpecFilesBytes)
	}
	return nil
}

// writeSpecFiles writes a spec's files into rootfs. No path may go through
// a symlink (a rootfs's symlinks point into the sandbox's tree, not the
// host's); an existing file is replaced, never written through.
func writeSpecFiles(rootfs string, files map[string]string) error {
	for p, content := range files {
		dir := rootfs
		parts := strings.Split(strings.TrimPrefix(path.Dir(p), "/"), "/")
		for _, part := range parts {
			if part == "" {
				continue
			}
			dir = filepath.Join(dir, part)
			fi, err := os.Lstat(dir)
			switch {
			case errors.Is(err, os.ErrNotExist):
				if err := os.Mkdir(dir, 0o755); err != nil {
					return fmt.Errorf("spec file %s: %w", p, err)
				}
			case err != nil:
				return fmt.Errorf("spec file %s: %w", p, err)
			case fi.Mode()&os.ModeSymlink != 0:
				return fmt.Errorf("spec file %s: %s is a symlink in the image; give the path it points to", p, "/"+strings.TrimPrefix(dir, rootfs+"/"))
			case !fi.IsDir():
				return fmt.Errorf("spec file %s: %s is not a directory", p, "/"+strings.TrimPrefix(dir, rootfs+"/"))
			}
		}
		dst := filepath.Join(rootfs, p)
		if fi, err := os.Lstat(dst); err == nil && fi.IsDir() {
			return fmt.Errorf("spec file %s is a directory in the image", p)
		}
		if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("spec file %s: %w", p, err)
		}
		_, err = f.WriteString(content)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("spec file %s: %w", p, err)
		}
		if err := os.Chmod(dst, 0o644); err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(dst, 0, 0); err != nil {
				return err
			}
		}
	}
	return nil
}
