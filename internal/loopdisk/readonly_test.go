package loopdisk_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/loopdisk"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

func hashFile(t *testing.T, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	return string(out)
}

// journalledDisk makes an ext4 image with a journal and a file in it,
// then marks it as a disk whose journal must be replayed, as a writer
// that was cut off (or one that wants the host to replay a journal it
// crafted) leaves it.
func journalledDisk(t *testing.T, dir string) string {
	t.Helper()
	for _, tool := range []string{"mkfs.ext4", "debugfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			testreq.Skip(t, "skipped: needs "+tool+" (e2fsprogs)")
		}
	}
	img := filepath.Join(dir, "disk.ext4")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 32<<20); err != nil {
		t.Fatal(err)
	}
	run(t, "mkfs.ext4", "-q", "-F", "-O", "has_journal", img)
	src := filepath.Join(dir, "hello.txt")
	os.WriteFile(src, []byte("hello from the guest\n"), 0o644)
	run(t, "debugfs", "-w", "-R", "write "+src+" hello.txt", img)
	run(t, "debugfs", "-w", "-R", "feature needs_recovery", img)
	if out := run(t, "debugfs", "-R", "features", img); !strings.Contains(out, "needs_recovery") {
		t.Fatalf("the disk is not marked for recovery: %s", out)
	}
	return img
}

// A disk that needs its journal replayed mounts read-only without the
// host writing a byte of it: no replay, no superblock update, a
// read-only loop device.
func TestMountReadOnlyWritesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		testreq.Skip(t, "skipped: needs root (loop devices and mounts)")
	}
	dir := t.TempDir()
	img := journalledDisk(t, dir)
	before := hashFile(t, img)
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o700)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := loopdisk.MountReadOnly(ctx, mnt, img); err != nil {
		t.Fatal(err)
	}
	defer loopdisk.UnmountAll(mnt)
	if got, err := os.ReadFile(filepath.Join(mnt, "hello.txt")); err != nil || !bytes.Equal(got, []byte("hello from the guest\n")) {
		t.Fatalf("read %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "new"), []byte("x"), 0o644); err == nil {
		t.Fatal("wrote into the read-only mount")
	}
	opts, dev := mountOf(t, mnt)
	for _, o := range []string{"ro", "nosuid", "nodev", "noexec"} {
		if !strings.Contains(","+opts+",", ","+o+",") {
			t.Errorf("mount options %q lack %s", opts, o)
		}
	}
	if ro, err := os.ReadFile("/sys/block/" + filepath.Base(dev) + "/ro"); err != nil || strings.TrimSpace(string(ro)) != "1" {
		t.Errorf("loop device %s read-only: %q, %v", dev, ro, err)
	}
	if err := loopdisk.UnmountAll(mnt); err != nil {
		t.Fatal(err)
	}
	if hashFile(t, img) != before {
		t.Fatal("the host changed the disk by mounting it read-only")
	}
}

// mountOf returns the mount options and source device of the mount at
// dir.
func mountOf(t *testing.T, dir string) (opts, dev string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 || f[4] != dir {
			continue
		}
		for i, x := range f {
			if x == "-" && i+2 < len(f) {
				return f[5], f[i+2]
			}
		}
	}
	t.Fatalf("no mount at %s", dir)
	return "", ""
}
