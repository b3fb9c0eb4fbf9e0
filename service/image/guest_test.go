//go:build linux

package image_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/service/image"
)

// guestKernel returns the unpacked kernel package scripts/setup.sh made,
// or skips.
func guestKernel(t *testing.T) string {
	t.Helper()
	state := os.Getenv("AIRLOCK_STATE_DIR")
	if state == "" {
		state = "/var/lib/airlock"
	}
	k, err := image.FindKernel(filepath.Join(state, "kernel"))
	if err != nil {
		testreq.Skipf(t, "skipped: %v", err)
	}
	return k
}

// The guest artefacts of an image: the kernel, an initramfs whose /init
// is the image's own agent with the modules in load order, and a
// read-only ext4 disk of the rootfs; built once, found again by hash.
func TestBuildGuest(t *testing.T) {
	kdir := guestKernel(t)
	if os.Geteuid() != 0 {
		testreq.Skip(t, "skipped: mkfs.ext4 -d of a rootfs needs root to read it all")
	}
	state := t.TempDir()
	rootfs := filepath.Join(state, "rootfs")
	agent := []byte("\x7fELF not really an agent " + strings.Repeat("x", 1000))
	for p, data := range map[string][]byte{image.AgentPath: agent, "/etc/hostname": []byte("x\n"), "/usr/bin/tool": []byte("tool")} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(rootfs, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rootfs, p), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	img := &airlock.Image{Name: "t", Hash: strings.Repeat("ab", 32), Rootfs: rootfs, Env: []string{"X=1"}}
	ctx := context.Background()
	g, err := image.BuildGuest(ctx, image.GuestConfig{StateDir: state, KernelDir: kdir}, img)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{g.Kernel, g.Initrd, g.RootDisk} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o444 {
			t.Errorf("%s: mode %v, want read-only", p, fi.Mode())
		}
		if !strings.HasPrefix(p, filepath.Join(state, "images", "guests", image.Short(g.Hash))+"/") {
			t.Errorf("%s is not in the guest's content-addressed directory", p)
		}
	}
	// Debian's kernel is decompressed once, at the build, into the ELF
	// the VM boots through its PVH entry.
	kernel, err := os.ReadFile(g.Kernel)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(g.Kernel) != "vmlinux" || !bytes.HasPrefix(kernel, []byte("\x7fELF")) {
		t.Errorf("the guest's kernel is %s (%q...), want the decompressed ELF vmlinux", g.Kernel, kernel[:min(len(kernel), 4)])
	}
	disk, err := os.ReadFile(g.RootDisk)
	if err != nil {
		t.Fatal(err)
	}
	if len(disk) < 1082 || binary.LittleEndian.Uint16(disk[1080:]) != 0xEF53 {
		t.Fatalf("the root disk is not ext4")
	}
	initrd, err := os.ReadFile(g.Initrd)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(initrd, agent) {
		t.Errorf("the initramfs does not hold the image's agent")
	}
	// The guest's init loads the modules in the order its config lists.
	for _, m := range []string{"virtio_ring", "virtio", "virtio_mmio", "virtio_console", "virtio_blk", "jbd2", "mbcache", "crc32c_generic", "ext4", "failover", "net_failover", "virtio_net"} {
		if !bytes.Contains(initrd, []byte(`"/lib/modules/`+m+`.ko"`)) {
			t.Fatalf("module %s is not in the initramfs config", m)
		}
	}
	pos := func(m string) int { return bytes.Index(initrd, []byte(`"/lib/modules/`+m+`.ko"`)) }
	for _, before := range [][2]string{{"virtio_ring", "virtio"}, {"virtio", "virtio_mmio"}, {"virtio_mmio", "virtio_console"}, {"virtio_console", "virtio_blk"}, {"jbd2", "ext4"}, {"mbcache", "ext4"}, {"failover", "net_failover"}, {"net_failover", "virtio_net"}} {
		if pos(before[0]) > pos(before[1]) {
			t.Errorf("%s is loaded after %s", before[0], before[1])
		}
	}
	fi, _ := os.Stat(g.RootDisk)
	again, err := image.BuildGuest(ctx, image.GuestConfig{StateDir: state, KernelDir: kdir}, img)
	if err != nil {
		t.Fatal(err)
	}
	fi2, _ := os.Stat(again.RootDisk)
	if again.Hash != g.Hash || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Errorf("the second build made new artefacts")
	}
	other := *img
	other.Hash = strings.Repeat("cd", 32)
	g3, err := image.BuildGuest(ctx, image.GuestConfig{StateDir: state, KernelDir: kdir}, &other)
	if err != nil {
		t.Fatal(err)
	}
	if g3.Hash == g.Hash {
		t.Errorf("another image got the same guest hash")
	}
	ents, _ := os.ReadDir(filepath.Join(state, "images", "guests"))
	if len(ents) != 2 {
		t.Errorf("%d guest directories, want 2", len(ents))
	}
	// The guest directory is no image: the store lists none.
	st, _ := image.NewStore(image.StoreConfig{StateDir: state})
	if imgs, _ := st.List(ctx); len(imgs) != 0 {
		t.Errorf("the store lists %v", imgs)
	}
	// Prune drops the guests of images it does not keep (here: none).
	removed, err := st.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 {
		t.Errorf("prune removed %v, want both guests", removed)
	}
	if _, err := os.Stat(g.RootDisk); err == nil {
		t.Errorf("a pruned guest is still there")
	}
}
