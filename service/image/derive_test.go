package image_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/mountinfo"
	"github.com/airlockhq/airlock/service/image"
)

// fakeInstaller stands in for apt-get in a chroot: it logs its
// arguments, checks that no service may start, installs a file per
// package, leaves apt lists behind (the recipe strips them) and edits a
// file of the parent's stage in place (which must not reach the parent).
const fakeInstaller = `#!/bin/sh
set -e
echo "$@" >> "$(dirname "$0")/install-calls"
root=$1
shift 3
test -x "$root/usr/sbin/policy-rc.d" || { echo "no policy-rc.d" >&2; exit 3; }
for p in "$@"; do echo "$p" > "$root/usr/bin/pkg-$p"; done
echo list > "$root/var/lib/apt/lists/deb_Packages"
echo 'written through' >> "$root/usr/bin/tool"
echo "Setting up $1 ..."
`

const failingInstaller = `#!/bin/sh
echo "E: Unable to locate package $4" >&2
exit 100
`

const slowInstaller = `#!/bin/sh
echo "Get:1 http://mirror.invalid/debian bookworm InRelease"
sleep 30
`

func (e *env) deriveBuilder(t *testing.T, installer string) *image.Builder {
	t.Helper()
	path := filepath.Join(e.bin, "installer")
	if err := os.WriteFile(path, []byte(installer), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := image.NewBuilder(image.Config{
		StateDir:    e.state,
		AgentPath:   e.agent,
		Mirror:      "http://mirror.invalid/debian",
		Progress:    e.progress,
		Debootstrap: filepath.Join(e.bin, "debootstrap"),
		Installer:   path,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *env) installCalls(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.bin, "install-calls"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// treeListing describes every entry below root: type, mode, owner, size,
// inode, modification time, and the sha256 of a file's content or a
// symlink's target. Equal listings: nothing below root was changed,
// replaced or written through.
func treeListing(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%v %d:%d %d ino=%d mtime=%d", fi.Mode(), st.Uid, st.Gid, fi.Size(), st.Ino, fi.ModTime().UnixNano())
		switch {
		case fi.Mode().IsRegular():
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			h := sha256.New()
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
			desc += " sha256=" + hex.EncodeToString(h.Sum(nil))
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			desc += " -> " + target
		}
		out[strings.TrimPrefix(path, root)] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// diffListings returns the entries that differ between two listings.
func diffListings(a, b map[string]string) []string {
	var d []string
	for p, x := range a {
		if y, ok := b[p]; !ok || x != y {
			d = append(d, fmt.Sprintf("%s: %q -> %q", p, x, b[p]))
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			d = append(d, p+": new")
		}
	}
	slices.Sort(d)
	return d
}

func readStageJSON(t *testing.T, state, hash string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(state, "images", "stages", hash, "stage.json"))), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBuildDerived: python-ds's stage is a copy of base's with only its
// extra packages installed, base's stage is left exactly as it was, and
// the recipe runs over the result as over any stage.
func TestBuildDerived(t *testing.T) {
	e := newEnv(t, fakeDebootstrap)
	ctx := context.Background()
	base, ds := spec(t, "base"), spec(t, "python-ds")
	baseStage := filepath.Join(e.state, "images", "stages", image.StageHash(base), "rootfs")
	dsStage := filepath.Join(e.state, "images", "stages", image.StageHash(ds), "rootfs")

	if _, err := e.deriveBuilder(t, fakeInstaller).Build(ctx, base); err != nil {
		t.Fatalf("Build(base): %v\n%s", err, e.progress)
	}
	before := treeListing(t, baseStage)

	e.progress.Reset()
	img, err := e.deriveBuilder(t, fakeInstaller).Build(ctx, ds)
	if err != nil {
		t.Fatalf("Build(python-ds): %v\n%s", err, e.progress)
	}
	if n := len(e.calls(t)); n != 1 {
		t.Errorf("debootstrap ran %d times, want once (base's)", n)
	}
	calls := e.installCalls(t)
	if len(calls) != 1 {
		t.Fatalf("installer calls = %q", calls)
	}
	args := strings.Fields(calls[0])
	if want := []string{"http://mirror.invalid/debian", "bookworm", "fonts-dejavu-core", "python3-matplotlib", "python3-numpy", "python3-pandas"}; !slices.Equal(args[1:], want) {
		t.Errorf("installer args = %q, want ROOTFS %q", args, want)
	}
	for _, want := range []string{"reusing stage " + image.Short(image.StageHash(base)), "copy the stage of base", "  apt| Setting up", "derived from base's stage"} {
		if !strings.Contains(e.progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, e.progress)
		}
	}

	if d := diffListings(before, treeListing(t, baseStage)); len(d) > 0 {
		t.Errorf("base's stage changed while python-ds was derived from it:\n%s", strings.Join(d, "\n"))
	}
	if got := readFile(t, filepath.Join(baseStage, "usr/bin/tool")); got != "a tool\n" {
		t.Errorf("base's usr/bin/tool = %q: the install wrote through", got)
	}
	if got := readFile(t, filepath.Join(dsStage, "usr/bin/tool")); got != "a tool\nwritten through\n" {
		t.Errorf("python-ds's usr/bin/tool = %q", got)
	}
	if a, _ := ino(t, filepath.Join(baseStage, "usr/bin/tool")); a == func() uint64 { b, _ := ino(t, filepath.Join(dsStage, "usr/bin/tool")); return b }() {
		t.Errorf("the derived stage shares an inode with its parent")
	}

	// The extra packages are there, the recipe ran, the build's own
	// files are gone.
	r := img.Rootfs
	for _, p := range []string{"python3-numpy", "python3-pandas", "python3-matplotlib", "fonts-dejavu-core"} {
		if _, err := os.Stat(filepath.Join(r, "usr/bin/pkg-"+p)); err != nil {
			t.Errorf("package %s not installed: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(r, "usr/bin/pkg-bash")); !os.IsNotExist(err) {
		t.Errorf("a package of the parent was installed again: %v", err)
	}
	if got := entries(t, filepath.Join(r, "var/lib/apt/lists")); len(got) != 0 {
		t.Errorf("apt lists left: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(r, "usr/sbin/policy-rc.d")); !os.IsNotExist(err) {
		t.Errorf("policy-rc.d left: %v", err)
	}
	if got := readFile(t, filepath.Join(r, "etc/resolv.conf")); got != "" {
		t.Errorf("resolv.conf = %q", got)
	}
	if got := readFile(t, filepath.Join(r, "etc/matplotlibrc")); !strings.Contains(got, "backend: Agg") {
		t.Errorf("matplotlibrc = %q", got)
	}
	if got := readFile(t, filepath.Join(r, "etc/passwd")); strings.Count(got, "\nsandbox:") != 1 {
		t.Errorf("passwd:\n%s", got)
	}

	info := readStageJSON(t, e.state, image.StageHash(ds))
	if info["parent"] != image.StageHash(base) || info["mirror"] != "http://mirror.invalid/debian" || info["debootstrap_seconds"] != 0.0 {
		t.Errorf("stage.json = %v", info)
	}
	if got := entries(t, filepath.Join(e.state, "images", ".tmp")); len(got) != 0 {
		t.Errorf("temp dirs left: %q", got)
	}
	if mps, err := mountinfoUnder(e.state); err != nil || len(mps) > 0 {
		t.Errorf("mounts left under the state dir: %v %v", mps, err)
	}

	// Building python-ds from nothing builds base's stage first.
	e2 := newEnv(t, fakeDebootstrap)
	if _, err := e2.deriveBuilder(t, fakeInstaller).Build(ctx, ds); err != nil {
		t.Fatalf("Build(python-ds) from nothing: %v\n%s", err, e2.progress)
	}
	if got := entries(t, filepath.Join(e2.state, "images", "stages")); !slices.Equal(got, slices.Sorted(slices.Values([]string{image.StageHash(base), image.StageHash(ds)}))) {
		t.Errorf("stages = %q", got)
	}
	if n := len(e2.calls(t)); n != 1 {
		t.Errorf("debootstrap calls = %d, want 1", n)
	}

	// Collect keeps both stages (shipped), and base's stage while a kept
	// derived stage names it.
	st, _ := image.NewStore(image.StoreConfig{StateDir: e.state})
	got, err := st.Collect(ctx, image.CollectConfig{})
	if err != nil || len(got.Removed) != 0 {
		t.Errorf("Collect removed %v, %v", got, err)
	}
}

func TestBuildDerivedFailure(t *testing.T) {
	e := newEnv(t, fakeDebootstrap)
	_, err := e.deriveBuilder(t, failingInstaller).Build(context.Background(), spec(t, "python-ds"))
	if err == nil || !strings.Contains(err.Error(), "Unable to locate package") {
		t.Fatalf("Build = %v, want the installer's last output", err)
	}
	derivedLeftovers(t, e.state)
}

func TestBuildDerivedCancel(t *testing.T) {
	e := newEnv(t, fakeDebootstrap)
	b := e.deriveBuilder(t, slowInstaller)
	if _, err := b.Build(context.Background(), spec(t, "base")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.Build(ctx, spec(t, "python-ds"))
	if err == nil || ctx.Err() == nil {
		t.Fatalf("Build = %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancel took %s", d)
	}
	derivedLeftovers(t, e.state)
}

// derivedLeftovers checks that a failed derived build left its parent's
// stage and image, and nothing of its own.
func derivedLeftovers(t *testing.T, state string) {
	t.Helper()
	if got := entries(t, filepath.Join(state, "images", "stages")); !slices.Equal(got, []string{image.StageHash(spec(t, "base"))}) {
		t.Errorf("stages = %q, want base's only", got)
	}
	if got := entries(t, filepath.Join(state, "images", ".tmp")); len(got) > 0 {
		t.Errorf("left temp dirs %q", got)
	}
	st, _ := image.NewStore(image.StoreConfig{StateDir: state})
	list, _ := st.List(context.Background())
	for _, img := range list {
		if img.Name == "python-ds" {
			t.Errorf("a python-ds image: %+v", img)
		}
	}
	if mps, err := mountinfoUnder(state); err != nil || len(mps) > 0 {
		t.Errorf("mounts left under the state dir: %v %v", mps, err)
	}
}

// TestCollectKeepsParentStages: a kept derived stage keeps the stage it
// was copied from (and that one's parent), while a derived stage nothing
// keeps goes with its parent.
func TestCollectKeepsParentStages(t *testing.T) {
	state := t.TempDir()
	stage := func(hash, parent string) string {
		dir := filepath.Join(state, "images", "stages", hash)
		if err := os.MkdirAll(filepath.Join(dir, "rootfs"), 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]string{"stage_hash": hash, "parent": parent})
		if err := os.WriteFile(filepath.Join(dir, "stage.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	h := func(c string) string { return strings.Repeat(c, 64) }
	grand := stage(h("1"), "")
	parent := stage(h("2"), h("1"))
	// A kept image was made from this derived stage (fakeImage names the
	// stage "stage-" and the first four characters of its hash).
	fakeImage(t, state, "derived", h("3"), time.Now(), 10)
	kept := stage("stage-3333", h("2"))
	orphanParent := stage(h("4"), "")
	orphan := stage(h("5"), h("4"))
	st, err := image.NewStore(image.StoreConfig{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Collect(context.Background(), image.CollectConfig{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got.Removed)
	if want := []string{orphanParent, orphan}; !slices.Equal(got.Removed, want) {
		t.Errorf("Collect removed %q, want %q", got.Removed, want)
	}
	for _, d := range []string{grand, parent, kept} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("a needed stage was removed: %v", err)
		}
	}
}

// mountinfoUnder returns the mount points at or below dir.
func mountinfoUnder(dir string) ([]string, error) {
	ms, err := mountinfo.Self()
	if err != nil {
		return nil, err
	}
	return mountinfo.Under(ms, dir), nil
}
