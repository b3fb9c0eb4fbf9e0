package image_test

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/image"
)

// fakeDebootstrap is a stand-in for debootstrap: it logs its arguments
// and makes a tiny rootfs with the things the recipe strips and edits.
const fakeDebootstrap = `#!/bin/sh
set -e
echo "$@" >> "$(dirname "$0")/calls"
shift 3
target=$2
mkdir -p "$target/etc" "$target/usr/bin" "$target/usr/share/doc/bash" "$target/usr/share/man/man1" \
	"$target/usr/share/locale/de/LC_MESSAGES" "$target/usr/share/locale/en_US" \
	"$target/var/cache/apt/archives" "$target/var/lib/apt/lists" "$target/tmp" "$target/debootstrap"
printf 'root:x:0:0:root:/root:/bin/bash\n' > "$target/etc/passwd"
printf 'root:x:0:\n' > "$target/etc/group"
printf 'root:*:19000:0:99999:7:::\n' > "$target/etc/shadow"
echo build-host > "$target/etc/hostname"
echo 'nameserver 10.0.0.53' > "$target/etc/resolv.conf"
echo readme > "$target/usr/share/doc/bash/README"
echo page > "$target/usr/share/man/man1/bash.1"
echo mo > "$target/usr/share/locale/de/LC_MESSAGES/bash.mo"
echo mo > "$target/usr/share/locale/en_US/bash.mo"
echo alias > "$target/usr/share/locale/locale.alias"
echo deb > "$target/var/cache/apt/archives/bash.deb"
echo list > "$target/var/lib/apt/lists/x_Packages"
echo 'a tool' > "$target/usr/bin/tool"
echo "I: Retrieving Release"
printf 'I: Base system installed successfully.'
`

const failingDebootstrap = `#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
shift 3
mkdir -p "$2/proc"
echo "E: Couldn't download packages: nodejs" >&2
exit 1
`

const slowDebootstrap = `#!/bin/sh
shift 3
mkdir -p "$2/etc"
echo "I: Retrieving Release"
sleep 30
`

type env struct {
	state, bin, agent string
	progress          *bytes.Buffer
}

func newEnv(t *testing.T, script string) *env {
	t.Helper()
	e := &env{state: t.TempDir(), bin: t.TempDir(), progress: &bytes.Buffer{}}
	if err := os.WriteFile(filepath.Join(e.bin, "debootstrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	e.agent = filepath.Join(e.bin, "agent")
	writeELF(t, e.agent, "agent v1", false)
	return e
}

func (e *env) builder(t *testing.T) *image.Builder {
	t.Helper()
	b, err := image.NewBuilder(image.Config{
		StateDir:    e.state,
		AgentPath:   e.agent,
		Mirror:      "http://mirror.invalid/debian",
		Progress:    e.progress,
		Debootstrap: filepath.Join(e.bin, "debootstrap"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *env) calls(t *testing.T) []string {
	b, err := os.ReadFile(filepath.Join(e.bin, "calls"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// writeELF writes a minimal ELF executable header followed by payload;
// dynamic adds a PT_INTERP program header.
func writeELF(t *testing.T, path, payload string, dynamic bool) {
	t.Helper()
	h := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: 1,
		Ehsize: 64, Phentsize: 56, Shentsize: 64,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var progs []elf.Prog64
	if dynamic {
		h.Phoff, h.Phnum = 64, 1
		progs = append(progs, elf.Prog64{Type: uint32(elf.PT_INTERP)})
	}
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, h)
	for _, p := range progs {
		binary.Write(&buf, binary.LittleEndian, p)
	}
	buf.WriteString(payload)
	// Replace, never rewrite in place: that is what the builder relies on too.
	os.Remove(path)
	if err := os.WriteFile(path, buf.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
}

func spec(t *testing.T, name string) airlock.ImageSpec {
	t.Helper()
	s, err := image.SpecByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func ino(t *testing.T, path string) (uint64, uint64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Ino, uint64(st.Nlink)
}

func TestBuild(t *testing.T) {
	e := newEnv(t, fakeDebootstrap)
	ctx := context.Background()
	base := spec(t, "base")
	img, err := e.builder(t).Build(ctx, base)
	if err != nil {
		t.Fatalf("Build: %v\n%s", err, e.progress)
	}

	// debootstrap was called once, the way the recipe says.
	calls := e.calls(t)
	if len(calls) != 1 {
		t.Fatalf("debootstrap calls = %q", calls)
	}
	args := strings.Fields(calls[0])
	if want := []string{"--variant=minbase", "--include=" + strings.Join(base.Packages, ","), "--components=main", "bookworm"}; !slices.Equal(args[:4], want) {
		t.Errorf("debootstrap args = %q, want prefix %q", args, want)
	}
	if args[5] != "http://mirror.invalid/debian" {
		t.Errorf("mirror arg = %q", args[5])
	}
	if !strings.Contains(e.progress.String(), "  debootstrap| I: Retrieving Release\n") ||
		!strings.Contains(e.progress.String(), "debootstrap| I: Base system installed successfully.\n") {
		t.Errorf("debootstrap output not streamed with a prefix:\n%s", e.progress)
	}

	// Layout and manifest.
	finalDir := filepath.Join(e.state, "images", "base-"+image.Short(img.Hash))
	if img.Rootfs != filepath.Join(finalDir, "rootfs") {
		t.Errorf("Rootfs = %s, want under %s", img.Rootfs, finalDir)
	}
	var m image.Manifest
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(finalDir, "manifest.json"))), &m); err != nil {
		t.Fatal(err)
	}
	agentSum, _ := image.FileSHA256(e.agent)
	if m.Name != "base" || m.Hash != image.Hash(base, agentSum) || m.AgentSHA256 != agentSum ||
		m.StageHash != image.StageHash(base) || m.SizeBytes != img.SizeBytes || m.BuiltAt.IsZero() {
		t.Errorf("manifest = %+v", m)
	}
	if !slices.Contains(img.Env, "LANG=C.UTF-8") || !slices.IsSorted(img.Env) {
		t.Errorf("Env = %q", img.Env)
	}
	if size, _ := image.DirSize(img.Rootfs); size != img.SizeBytes || size == 0 {
		t.Errorf("SizeBytes = %d, DirSize = %d", img.SizeBytes, size)
	}

	// The recipe.
	r := img.Rootfs
	for _, d := range []string{"usr/share/doc", "usr/share/man", "var/cache/apt", "var/lib/apt/lists"} {
		if got := entries(t, filepath.Join(r, d)); len(got) != 0 {
			t.Errorf("%s not emptied: %q", d, got)
		}
	}
	if got := entries(t, filepath.Join(r, "usr/share/locale")); !slices.Equal(got, []string{"en_US", "locale.alias"}) {
		t.Errorf("usr/share/locale = %q", got)
	}
	if _, err := os.Stat(filepath.Join(r, "debootstrap")); !os.IsNotExist(err) {
		t.Errorf("debootstrap dir left: %v", err)
	}
	if got := readFile(t, filepath.Join(r, "etc/passwd")); !strings.Contains(got, "\nsandbox:x:1000:1000:Airlock sandbox:/workspace:/bin/bash\n") {
		t.Errorf("passwd:\n%s", got)
	}
	if got := readFile(t, filepath.Join(r, "etc/group")); !strings.Contains(got, "\nsandbox:x:1000:\n") {
		t.Errorf("group:\n%s", got)
	}
	if got := readFile(t, filepath.Join(r, "etc/shadow")); !strings.Contains(got, "\nsandbox:*:") {
		t.Errorf("shadow:\n%s", got)
	}
	if got := readFile(t, filepath.Join(r, "etc/resolv.conf")); got != "" {
		t.Errorf("host resolv.conf kept: %q", got)
	}
	if got := readFile(t, filepath.Join(r, "etc/hostname")); got != "sandbox\n" {
		t.Errorf("hostname = %q", got)
	}
	if fi, err := os.Stat(filepath.Join(r, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("tmp mode = %v, %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(r, "workspace")); err != nil || !fi.IsDir() {
		t.Errorf("workspace: %v", err)
	} else if os.Geteuid() == 0 && fi.Sys().(*syscall.Stat_t).Uid != 1000 {
		t.Errorf("workspace owner = %d", fi.Sys().(*syscall.Stat_t).Uid)
	}
	if _, err := os.Stat(filepath.Join(r, "etc/matplotlibrc")); !os.IsNotExist(err) {
		t.Errorf("base has a matplotlibrc: %v", err)
	}
	agentPath := filepath.Join(r, image.AgentPath)
	if fi, err := os.Stat(agentPath); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("agent: %v %v", fi, err)
	}
	if got := readFile(t, agentPath); !strings.HasSuffix(got, "agent v1") {
		t.Errorf("agent content %q", got)
	}

	// A second build is a no-op.
	e.progress.Reset()
	again, err := e.builder(t).Build(ctx, base)
	if err != nil || again.Hash != img.Hash || again.Rootfs != img.Rootfs {
		t.Fatalf("rebuild = %+v, %v", again, err)
	}
	if !strings.Contains(e.progress.String(), "up to date") || len(e.calls(t)) != 1 {
		t.Errorf("rebuild was not a no-op: %d calls\n%s", len(e.calls(t)), e.progress)
	}

	// A new agent reuses the stage and leaves the old image alone.
	writeELF(t, e.agent, "agent v2", false)
	e.progress.Reset()
	img2, err := e.builder(t).Build(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.calls(t)) != 1 || !strings.Contains(e.progress.String(), "reusing stage") {
		t.Errorf("stage not reused: %d calls\n%s", len(e.calls(t)), e.progress)
	}
	if img2.Hash == img.Hash || img2.Rootfs == img.Rootfs {
		t.Fatalf("same image for a new agent: %s", img2.Hash)
	}
	if got := readFile(t, agentPath); !strings.HasSuffix(got, "agent v1") {
		t.Errorf("old image's agent was overwritten: %q", got)
	}
	if got := readFile(t, filepath.Join(img2.Rootfs, image.AgentPath)); !strings.HasSuffix(got, "agent v2") {
		t.Errorf("new agent content %q", got)
	}
	stageRootfs := filepath.Join(e.state, "images", "stages", image.StageHash(base), "rootfs")
	if _, err := os.Stat(filepath.Join(stageRootfs, image.AgentPath)); !os.IsNotExist(err) {
		t.Errorf("stage has an agent: %v", err)
	}
	if a, _ := ino(t, filepath.Join(stageRootfs, "usr/bin/tool")); a != func() uint64 { b, _ := ino(t, filepath.Join(img2.Rootfs, "usr/bin/tool")); return b }() {
		t.Errorf("final rootfs is not a hard-link copy of the stage")
	}
	if _, n := ino(t, filepath.Join(img2.Rootfs, image.AgentPath)); n != 1 {
		t.Errorf("agent has %d links", n)
	}

	// The store sees both; which one resolves depends on the agent.
	st, err := image.NewStore(image.StoreConfig{StateDir: e.state, AgentPath: e.agent})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.Resolve(ctx, "base"); err != nil || got.Hash != img2.Hash {
		t.Errorf("Resolve with agent v2 = %+v, %v", got, err)
	}
	// The agent is pinned when the store is made: replacing the file
	// under a running server changes nothing until a new store.
	writeELF(t, e.agent, "agent v1", false)
	if got, err := st.Resolve(ctx, "base"); err != nil || got.Hash != img2.Hash {
		t.Errorf("Resolve after the agent file changed = %+v, %v; want the image of the agent the store was made with", got, err)
	}
	st1, _ := image.NewStore(image.StoreConfig{StateDir: e.state, AgentPath: e.agent})
	if got, err := st1.Resolve(ctx, "base"); err != nil || got.Hash != img.Hash {
		t.Errorf("Resolve with agent v1 = %+v, %v", got, err)
	}
	writeELF(t, e.agent, "agent v3", false)
	st3, _ := image.NewStore(image.StoreConfig{StateDir: e.state, AgentPath: e.agent})
	if _, err := st3.Resolve(ctx, "base"); airlock.ErrorCode(err) != airlock.ENOTFOUND || !strings.Contains(airlock.ErrorMessage(err), "airlock image build base") {
		t.Errorf("Resolve with an unbuilt agent = %v", err)
	}
	anyAgent, _ := image.NewStore(image.StoreConfig{StateDir: e.state})
	if got, err := anyAgent.Resolve(ctx, "base"); err != nil || (got.Hash != img2.Hash && !got.BuiltAt.Equal(img.BuiltAt)) {
		t.Errorf("Resolve without agent = %+v, %v", got, err)
	}
	if _, err := anyAgent.Resolve(ctx, "python-ds"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("Resolve(python-ds) = %v, want not found", err)
	}
	if _, err := anyAgent.Resolve(ctx, "nope"); airlock.ErrorCode(err) != airlock.EINVALID {
		t.Errorf("Resolve(nope) = %v, want invalid", err)
	}
	list, err := anyAgent.List(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "base" {
		t.Errorf("List = %+v, %v", list, err)
	}

	// New packages: a new stage.
	more := base
	more.Packages = append(slices.Clone(base.Packages), "jq")
	if _, err := e.builder(t).Build(ctx, more); err != nil {
		t.Fatal(err)
	}
	if n := len(e.calls(t)); n != 2 {
		t.Errorf("debootstrap calls after a package change = %d, want 2", n)
	}

	// Prune keeps one image of base and the stage it was made from, and
	// the microVM guest of that image only.
	for dir, of := range map[string]string{"keep": img2.Hash, "drop": img.Hash} {
		g := filepath.Join(e.state, "images", "guests", dir)
		if err := os.MkdirAll(g, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(g, "guest.json"), []byte(`{"hash": "x", "image": "`+of+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeELF(t, e.agent, "agent v2", false)
	removed, err := st.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	list, _ = anyAgent.List(ctx)
	if len(list) != 1 || list[0].Hash != img2.Hash {
		t.Errorf("after Prune: %+v (removed %q)", list, removed)
	}
	if got := entries(t, filepath.Join(e.state, "images", "stages")); !slices.Equal(got, []string{image.StageHash(base)}) {
		t.Errorf("stages after Prune = %q", got)
	}
	if got := entries(t, filepath.Join(e.state, "images", "guests")); !slices.Equal(got, []string{"keep"}) {
		t.Errorf("guests after Prune = %q", got)
	}
}

func TestBuildMatplotlibrc(t *testing.T) {
	e := newEnv(t, fakeDebootstrap)
	img, err := e.deriveBuilder(t, fakeInstaller).Build(context.Background(), spec(t, "python-ds"))
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(img.Rootfs, "etc/matplotlibrc")); !strings.Contains(got, "\nbackend: Agg\n") {
		t.Errorf("matplotlibrc = %q", got)
	}
	if !slices.Contains(img.Env, "MPLBACKEND=Agg") {
		t.Errorf("Env = %q", img.Env)
	}
}

// noLeftovers checks that a failed build left nothing that counts.
func noLeftovers(t *testing.T, state string) {
	t.Helper()
	imgs := filepath.Join(state, "images")
	for _, n := range entries(t, imgs) {
		if n != ".tmp" && n != ".lock" && n != "stages" {
			t.Errorf("left %s in %s", n, imgs)
		}
	}
	if got := entries(t, filepath.Join(imgs, "stages")); len(got) > 0 {
		t.Errorf("left stages %q", got)
	}
	if got := entries(t, filepath.Join(imgs, ".tmp")); len(got) > 0 {
		t.Errorf("left temp dirs %q", got)
	}
	st, _ := image.NewStore(image.StoreConfig{StateDir: state})
	if list, _ := st.List(context.Background()); len(list) > 0 {
		t.Errorf("List = %+v", list)
	}
}

func TestBuildFailure(t *testing.T) {
	e := newEnv(t, failingDebootstrap)
	_, err := e.builder(t).Build(context.Background(), spec(t, "base"))
	if err == nil || !strings.Contains(err.Error(), "Couldn't download packages") {
		t.Fatalf("Build = %v, want debootstrap's last output in the error", err)
	}
	noLeftovers(t, e.state)
}

func TestBuildCancel(t *testing.T) {
	e := newEnv(t, slowDebootstrap)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.builder(t).Build(ctx, spec(t, "base"))
	if err == nil || ctx.Err() == nil {
		t.Fatalf("Build = %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancel took %s", d)
	}
	noLeftovers(t, e.state)
}

func TestBuildCleansCrashedBuild(t *testing.T) {
	e := newEnv(t, fakeDebootstrap)
	base := spec(t, "base")
	sum, _ := image.FileSHA256(e.agent)
	imgs := filepath.Join(e.state, "images")
	// What a crash can leave: a temp dir, and (from an older builder or a
	// hand copy) a final directory without a manifest.
	half := filepath.Join(imgs, "base-"+image.Short(image.Hash(base, sum)))
	for _, d := range []string{filepath.Join(imgs, ".tmp", "stage-0123-456", "rootfs", "etc"), filepath.Join(half, "rootfs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := image.NewStore(image.StoreConfig{StateDir: e.state, AgentPath: e.agent})
	if _, err := st.Resolve(context.Background(), "base"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Fatalf("a half-built image resolved: %v", err)
	}
	img, err := e.builder(t).Build(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	if got := entries(t, filepath.Join(imgs, ".tmp")); len(got) != 0 {
		t.Errorf("stale temp dirs left: %q", got)
	}
	if filepath.Dir(img.Rootfs) != half {
		t.Errorf("Rootfs = %s", img.Rootfs)
	}
	if got, err := st.Resolve(context.Background(), "base"); err != nil || got.Hash != img.Hash {
		t.Errorf("Resolve = %+v, %v", got, err)
	}
}

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	static := filepath.Join(dir, "static")
	dynamic := filepath.Join(dir, "dynamic")
	text := filepath.Join(dir, "text")
	writeELF(t, static, "x", false)
	writeELF(t, dynamic, "x", true)
	os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755)
	ok := image.Config{StateDir: dir, AgentPath: static, Debootstrap: "/bin/true"}
	tests := []struct {
		name string
		edit func(*image.Config)
		want string
	}{
		{"ok", func(*image.Config) {}, ""},
		{"no state dir", func(c *image.Config) { c.StateDir = "" }, "state directory"},
		{"no agent", func(c *image.Config) { c.AgentPath = "" }, "--agent"},
		{"missing agent", func(c *image.Config) { c.AgentPath = filepath.Join(dir, "nope") }, "no such file"},
		{"dynamic agent", func(c *image.Config) { c.AgentPath = dynamic }, "CGO_ENABLED=0"},
		{"script agent", func(c *image.Config) { c.AgentPath = text }, "not an ELF"},
		{"bad mirror", func(c *image.Config) { c.Mirror = "deb.example/debian" }, "mirror"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			err := c.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}
