package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/guestabi"
)

// GuestModules are the kernel modules a guest loads, in this order (each
// after its dependencies, which are added): the virtio transport over
// MMIO and its console (the agent's port), the block device, ext4 with
// the checksum it asks the crypto API for (a module nothing "depends"
// on, so it is named here), and the network device of a guest with a
// network (loaded in every guest; one without a network has no device).
var GuestModules = []string{"virtio_ring", "virtio", "virtio_mmio", "virtio_console", "virtio_blk", "crc32c_generic", "ext4", "virtio_net"}

// GuestConfig says where the guest artefacts come from.
type GuestConfig struct {
	// StateDir is the node's state directory (images live in
	// StateDir/images, guests in StateDir/images/guests).
	StateDir string
	// KernelDir is an unpacked Debian kernel package (boot/vmlinuz-*,
	// lib/modules/*); empty: the newest under StateDir/kernel, where
	// scripts/setup.sh unpacks linux-image-amd64.
	KernelDir string
	// Progress receives a line per step; nil discards.
	Progress io.Writer
}

// Validate fills defaults and checks c.
func (c *GuestConfig) Validate() error {
	if c.StateDir == "" || !filepath.IsAbs(c.StateDir) {
		return errors.New("guest: the state directory must be an absolute path")
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.KernelDir == "" {
		k, err := FindKernel(filepath.Join(c.StateDir, "kernel"))
		if err != nil {
			return err
		}
		c.KernelDir = k
	}
	return nil
}

// FindKernel returns the newest complete unpacked kernel package under
// dir (scripts/setup.sh writes them there, each with a .complete file).
func FindKernel(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var found []string
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), ".complete")); e.IsDir() && err == nil {
			found = append(found, e.Name())
		}
	}
	if len(found) == 0 {
		return "", airlock.Errorf(airlock.ENOTFOUND, "no guest kernel in %s; scripts/setup.sh unpacks Debian's linux-image-amd64 there", dir)
	}
	sort.Slice(found, func(i, j int) bool { return versionLess(found[i], found[j]) })
	return filepath.Join(dir, found[len(found)-1]), nil
}

// versionLess orders names like 6.1.0-57-amd64_6.1.192-3 by their
// numbers.
func versionLess(a, b string) bool {
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' || r == '_' || r == '+' || r == '~' })
	}
	x, y := split(a), split(b)
	for i := 0; i < len(x) && i < len(y); i++ {
		nx, ex := strconv.Atoi(x[i])
		ny, ey := strconv.Atoi(y[i])
		switch {
		case ex == nil && ey == nil && nx != ny:
			return nx < ny
		case (ex != nil || ey != nil) && x[i] != y[i]:
			return x[i] < y[i]
		}
	}
	return len(x) < len(y)
}

// kernel is an unpacked kernel package.
type kernel struct {
	release string
	vmlinuz string
	modDir  string
}

func findKernelFiles(dir string) (*kernel, error) {
	ms, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(ms) != 1 {
		return nil, fmt.Errorf("guest: %s: want one boot/vmlinuz-*, found %d", dir, len(ms))
	}
	rel := strings.TrimPrefix(filepath.Base(ms[0]), "vmlinuz-")
	mod := filepath.Join(dir, "lib", "modules", rel)
	if _, err := os.Stat(mod); err != nil {
		return nil, fmt.Errorf("guest: kernel %s has no modules: %w", rel, err)
	}
	return &kernel{release: rel, vmlinuz: ms[0], modDir: mod}, nil
}

var guestMu sync.Mutex // builds in this process, one at a time

// BuildGuest returns the guest artefacts of img, building them when they
// are not there yet (a few seconds: the root disk is the rootfs copied
// into ext4 with mkfs.ext4 -d). Builds are serialised with the image
// builds of the state directory.
func BuildGuest(ctx context.Context, cfg GuestConfig, img *airlock.Image) (*guestabi.Guest, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if img == nil || img.Rootfs == "" || img.Hash == "" {
		return nil, errors.New("guest: no image")
	}
	k, err := findKernelFiles(cfg.KernelDir)
	if err != nil {
		return nil, err
	}
	mods, err := kernelModules(k.modDir, GuestModules)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "guest recipe %s\nimage %s\nkernel elf %d\n", guestabi.RecipeVersion, img.Hash, kernelELFVersion)
	for _, p := range append([]string{k.vmlinuz}, mods...) {
		sum, err := FileSHA256(p)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(h, "%s %s\n", filepath.Base(p), sum)
	}
	hash := hex.EncodeToString(h.Sum(nil))
	imagesDir := filepath.Join(cfg.StateDir, "images")
	dir := filepath.Join(imagesDir, "guests", Short(hash))
	if g, err := readGuest(dir, hash); err == nil {
		return g, nil
	}
	guestMu.Lock()
	defer guestMu.Unlock()
	unlock, err := lockImages(ctx, imagesDir, cfg.Progress)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if g, err := readGuest(dir, hash); err == nil {
		return g, nil
	}
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(cfg.Progress, "[guest %s %4.1fs] %s\n", Short(hash), time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	if err := os.MkdirAll(filepath.Join(imagesDir, ".tmp"), 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Join(imagesDir, ".tmp"), "guest-"+Short(hash)+"-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	os.Chmod(tmp, 0o755)
	step("kernel %s from %s", k.release, cfg.KernelDir)
	kernelFile := "vmlinux"
	if err := extractKernelELF(ctx, k.vmlinuz, filepath.Join(tmp, kernelFile)); err != nil {
		step("kernel: no uncompressed ELF (%v); the VM boots the bzImage, which decompresses itself at every boot", err)
		kernelFile = "vmlinuz"
		if err := copyFile(k.vmlinuz, filepath.Join(tmp, kernelFile)); err != nil {
			return nil, err
		}
	} else {
		step("kernel: decompressed once into an ELF the VM boots through its PVH entry")
	}
	step("initramfs: %d modules and the agent as /init", len(mods))
	if err := writeInitramfs(filepath.Join(tmp, "initrd.cpio"), img, mods); err != nil {
		return nil, err
	}
	step("root disk: mkfs.ext4 -d %s", img.Rootfs)
	size, err := makeRootDisk(ctx, filepath.Join(tmp, "root.ext4"), img.Rootfs)
	if err != nil {
		return nil, err
	}
	g := &guestabi.Guest{Hash: hash, Image: img.Hash, KernelRelease: k.release, RootDiskBytes: size, BuiltAt: time.Now().UTC().Truncate(time.Second)}
	for _, f := range []string{kernelFile, "initrd.cpio", "root.ext4"} {
		if err := os.Chmod(filepath.Join(tmp, f), 0o444); err != nil {
			return nil, err
		}
	}
	if err := writeJSON(filepath.Join(tmp, "guest.json"), g); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	os.RemoveAll(dir) // an incomplete leftover
	syncAll()
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	ok = true
	step("built %s", dir)
	return readGuest(dir, hash)
}

// GuestBuilder returns BuildGuest under cfg, for the microVM backend
// (its Config.BuildGuest).
func GuestBuilder(cfg GuestConfig) func(ctx context.Context, img *airlock.Image) (*guestabi.Guest, error) {
	return func(ctx context.Context, img *airlock.Image) (*guestabi.Guest, error) {
		return BuildGuest(ctx, cfg, img)
	}
}

func readGuest(dir, hash string) (*guestabi.Guest, error) {
	data, err := os.ReadFile(filepath.Join(dir, "guest.json"))
	if err != nil {
		return nil, err
	}
	var g guestabi.Guest
	if err := json.Unmarshal(data, &g); err != nil {
		return nil, err
	}
	if g.Hash != hash {
		return nil, fmt.Errorf("guest: %s holds %s", dir, Short(g.Hash))
	}
	// The kernel is the decompressed ELF (vmlinux) where the build could
	// make one, else the distribution's bzImage (vmlinuz).
	g.Kernel = filepath.Join(dir, "vmlinux")
	if _, err := os.Stat(g.Kernel); err != nil {
		g.Kernel = filepath.Join(dir, "vmlinuz")
	}
	g.Initrd, g.RootDisk = filepath.Join(dir, "initrd.cpio"), filepath.Join(dir, "root.ext4")
	return &g, nil
}

// writeInitramfs writes the guest's initramfs: /init (the image's agent,
// which runs package guestinit as PID 1), its config, the modules and a
// console node for the kernel to open as init's stdio.
func writeInitramfs(path string, img *airlock.Image, mods []string) error {
	agent, err := os.ReadFile(filepath.Join(img.Rootfs, AgentPath))
	if err != nil {
		return fmt.Errorf("guest: the image's agent: %w", err)
	}
	cfg := guestabi.Config{
		RootSerial:    guestabi.RootSerial,
		ScratchSerial: guestabi.ScratchSerial,
		Port:          guestabi.Port,
		ReseedPort:    guestabi.ReseedPort,
		Agent:         AgentPath,
		Env: append([]string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"HOME=/workspace",
			"LANG=C.UTF-8",
			"USER=sandbox",
			"TMPDIR=/tmp",
		}, img.Env...),
		Hostname: "sandbox",
		UID:      1000,
		GID:      1000,
	}
	var buf bytes.Buffer
	w := &cpioWriter{w: &buf}
	w.Dir("dev", 0o755)
	w.CharDev("dev/console", 0o600, 5, 1)
	w.Dir("proc", 0o555)
	w.Dir("airlock", 0o755)
	w.Dir("lib", 0o755)
	w.Dir("lib/modules", 0o755)
	for _, m := range mods {
		data, err := os.ReadFile(m)
		if err != nil {
			return err
		}
		name := "lib/modules/" + filepath.Base(m)
		w.File(name, 0o644, data)
		cfg.Modules = append(cfg.Modules, "/"+name)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	cj, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	w.File(strings.TrimPrefix(guestabi.ConfigPath, "/"), 0o644, cj)
	w.File(strings.TrimPrefix(guestabi.InitPath, "/"), 0o755, agent)
	if err := w.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// makeRootDisk writes rootfs into a new ext4 image at path, sized to fit
// with a little room, without a journal (it is only ever read), and
// returns its size.
func makeRootDisk(ctx context.Context, path, rootfs string) (int64, error) {
	var files int64
	size, err := DirSize(rootfs)
	if err != nil {
		return 0, err
	}
	filepath.WalkDir(rootfs, func(string, os.DirEntry, error) error { files++; return nil })
	// Room for metadata and the per-file block rounding DirSize does not
	// count, rounded to MiB.
	total := (size + size/4 + files*4096 + 64<<20 + 1<<20 - 1) &^ (1<<20 - 1)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	if err := f.Truncate(total); err != nil {
		f.Close()
		return 0, err
	}
	f.Close()
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-d", rootfs, "-O", "^has_journal",
		"-N", strconv.FormatInt(files+files/4+1024, 10), "-m", "0", "-L", "airlock-root", path).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("guest: mkfs.ext4 -d: %w: %s", err, bytes.TrimSpace(out))
	}
	return total, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// KernelImage returns the kernel (bzImage) of an unpacked kernel package.
func KernelImage(dir string) (string, error) {
	k, err := findKernelFiles(dir)
	if err != nil {
		return "", err
	}
	return k.vmlinuz, nil
}
