package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/secretscan"
)

// AgentPath is where the agent lives inside every image.
const AgentPath = "/opt/airlock/bin/airlock-agent"

// ChannelDir is the empty directory every image has for the agent's
// channel to the host (a backend mounts a host directory there).
const ChannelDir = "/run/airlock"

// Config configures a Builder.
type Config struct {
	// StateDir is the node's state directory; images live in StateDir/images.
	StateDir string
	// AgentPath is the static airlock-agent binary baked into every image.
	AgentPath string
	// Mirror is the Debian mirror URL for debootstrap. Empty: the URI the
	// host's apt sources use for the spec's suite.
	Mirror string
	// Progress receives one line per step and debootstrap's output. Nil
	// discards it.
	Progress io.Writer

	// Debootstrap is the debootstrap command; empty means "debootstrap"
	// from PATH or /usr/sbin. Tests point it at a fake.
	Debootstrap string
	// AptDir is where the host's apt sources are read; empty means /etc/apt.
	AptDir string
	// Installer installs a derived stage's extra packages into a copy of
	// its parent's stage: called as INSTALLER ROOTFS MIRROR SUITE
	// PACKAGE... Empty means apt-get in a chroot, in mount and PID
	// namespaces of its own (derive.go). Tests point it at a fake.
	Installer string

	// Secrets scans each spec and each rootfs before it is published: an
	// image holding a credential is refused. Nil means the patterns and
	// allow-list of secretscan.Default, without the host's own values.
	Secrets *secretscan.Scanner
}

// Validate checks c and reports the first problem.
func (c *Config) Validate() error {
	if c.StateDir == "" {
		return errors.New("image builder: no state directory")
	}
	if c.AgentPath == "" {
		return errors.New("image builder: no agent binary; pass --agent PATH")
	}
	if err := checkStaticELF(c.AgentPath); err != nil {
		return fmt.Errorf("image builder: agent: %w", err)
	}
	if c.Mirror != "" && !usableMirror(c.Mirror) {
		return fmt.Errorf("image builder: mirror %q is not an http, https, ftp or file URL", c.Mirror)
	}
	if c.Debootstrap == "" && os.Geteuid() != 0 {
		return errors.New("image builder: building images needs root (debootstrap and chroot)")
	}
	return nil
}

// checkStaticELF reports an error unless path is a regular ELF executable
// without a program interpreter: the images have no Go runtime linking.
func checkStaticELF(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// Builder builds images into Config.StateDir/images. Builds of one state
// directory are serialised by a file lock, across processes too.
type Builder struct {
	cfg       Config
	imagesDir string
}

// NewBuilder validates cfg and returns a Builder.
func NewBuilder(cfg Config) (*Builder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	state, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	cfg.StateDir = state
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.AptDir == "" {
		cfg.AptDir = "/etc/apt"
	}
	if cfg.Secrets == nil {
		cfg.Secrets = secretscan.Default()
	}
	if cfg.Debootstrap == "" {
		cfg.Debootstrap = "debootstrap"
		if _, err := exec.LookPath("debootstrap"); err != nil {
			if _, err := os.Stat("/usr/sbin/debootstrap"); err != nil {
				return nil, errors.New("image builder: debootstrap not found; install it (apt-get install debootstrap)")
			}
			cfg.Debootstrap = "/usr/sbin/debootstrap"
		}
	}
	return &Builder{cfg: cfg, imagesDir: filepath.Join(state, "images")}, nil
}

// ImagesDir returns the directory holding the builder's images.
func (b *Builder) ImagesDir() string { return b.imagesDir }

func (b *Builder) stagesDir() string { return filepath.Join(b.imagesDir, "stages") }
func (b *Builder) tmpDir() string    { return filepath.Join(b.imagesDir, ".tmp") }

// build is the state of one Build call, for progress lines.
type build struct {
	b     *Builder
	name  string
	start time.Time
}

func (bl *build) step(format string, args ...any) {
	el := time.Since(bl.start)
	fmt.Fprintf(bl.b.cfg.Progress, "[%s %4.1fs] %s\n", bl.name, el.Seconds(), fmt.Sprintf(format, args...))
}

// Build makes sure the image of spec with the configured agent is built
// and returns it. It is a no-op if that image exists; it reuses the stage
// (the debootstrap output) if only the agent changed.
func (b *Builder) Build(ctx context.Context, spec airlock.ImageSpec) (*airlock.Image, error) {
	if err := ValidateSpec(spec); err != nil {
		return nil, err
	}
	if err := b.scanSpec(spec); err != nil {
		return nil, err
	}
	bl := &build{b: b, name: spec.Name, start: time.Now()}
	agentSum, err := FileSHA256(b.cfg.AgentPath)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	hash := Hash(spec, agentSum)
	stageHash := StageHash(spec)
	finalDir := filepath.Join(b.imagesDir, spec.Name+"-"+Short(hash))

	if img := upToDate(finalDir, spec.Name, hash); img != nil {
		bl.step("up to date: %s", finalDir)
		return img, nil
	}

	unlock, err := lockImages(ctx, b.imagesDir, b.cfg.Progress)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if img := upToDate(finalDir, spec.Name, hash); img != nil { // built while we waited
		bl.step("up to date: %s", finalDir)
		return img, nil
	}
	if err := b.cleanTemp(); err != nil {
		return nil, err
	}

	stageRootfs, err := b.stage(ctx, bl, spec, stageHash)
	if err != nil {
		return nil, err
	}

	tmp, err := os.MkdirTemp(b.tmpDir(), spec.Name+"-"+Short(hash)+"-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			removeTree(tmp)
		}
	}()
	rootfs := filepath.Join(tmp, "rootfs")
	bl.step("hard-link copy of stage %s", Short(stageHash))
	if err := run(ctx, nil, "cp", "-al", stageRootfs, rootfs); err != nil {
		return nil, err
	}
	bl.step("install agent %s (sha256 %s)", AgentPath, Short(agentSum))
	if err := installAgent(b.cfg.AgentPath, rootfs, agentSum); err != nil {
		return nil, err
	}
	scan, err := b.scanRootfs(ctx, bl, spec.Name, rootfs)
	if err != nil {
		return nil, err
	}
	size, err := DirSize(rootfs)
	if err != nil {
		return nil, fmt.Errorf("size of %s: %w", rootfs, err)
	}
	m := &Manifest{
		Name:        spec.Name,
		Hash:        hash,
		StageHash:   stageHash,
		Recipe:      RecipeVersion,
		Spec:        spec,
		SizeBytes:   size,
		Env:         envList(spec.Env),
		BuiltAt:     time.Now().UTC().Truncate(time.Second),
		AgentSHA256: agentSum,
		SecretScan:  scan,
	}
	if err := writeJSON(filepath.Join(tmp, ManifestFile), m); err != nil {
		return nil, err
	}
	// A directory of this name without a matching manifest is a leftover
	// of an older recipe or a hand edit: move it out of the way first.
	if _, err := os.Lstat(finalDir); err == nil {
		old := filepath.Join(b.tmpDir(), "old-"+filepath.Base(finalDir)+fmt.Sprintf("-%d", time.Now().UnixNano()))
		if err := os.Rename(finalDir, old); err != nil {
			return nil, err
		}
		removeTree(old)
	}
	syncAll()
	if err := os.Rename(tmp, finalDir); err != nil {
		return nil, err
	}
	ok = true
	syncDir(b.imagesDir)
	bl.step("built %s (%s)", finalDir, HumanSize(size))
	return m.image(finalDir), nil
}

// upToDate returns the image in dir if its manifest names hash.
func upToDate(dir, name, hash string) *airlock.Image {
	m, err := readManifest(dir)
	if err != nil || m.Name != name || m.Hash != hash {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "rootfs", AgentPath)); err != nil {
		return nil
	}
	return m.image(dir)
}

// cleanTemp removes what crashed or killed builds left in .tmp. The
// caller holds the build lock, so no build is using it.
func (b *Builder) cleanTemp() error {
	if err := os.MkdirAll(b.tmpDir(), 0o700); err != nil {
		return err
	}
	ents, err := os.ReadDir(b.tmpDir())
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(b.tmpDir(), e.Name())
		fmt.Fprintf(b.cfg.Progress, "removing unfinished build %s\n", p)
		if err := removeTree(p); err != nil {
			return fmt.Errorf("clean unfinished build: %w", err)
		}
	}
	return nil
}

// stageInfo is stage.json, written last into a stage directory.
type stageInfo struct {
	StageHash string            `json:"stage_hash"`
	Recipe    string            `json:"recipe"`
	Spec      airlock.ImageSpec `json:"spec"`
	Mirror    string            `json:"mirror"`
	BuiltAt   time.Time         `json:"built_at"`
	// DebootstrapSeconds is the debootstrap's time; 0 for a derived stage.
	DebootstrapSeconds float64 `json:"debootstrap_seconds"`
	// Parent is the stage hash of the stage a derived stage was copied
	// from (the garbage collector keeps it while this stage is kept);
	// DeriveSeconds the copy's and apt-get's time.
	Parent        string  `json:"parent,omitempty"`
	DeriveSeconds float64 `json:"derive_seconds,omitempty"`
}

// readStageInfo reads dir/stage.json.
func readStageInfo(dir string) (*stageInfo, error) {
	data, err := os.ReadFile(filepath.Join(dir, "stage.json"))
	if err != nil {
		return nil, err
	}
	var info stageInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "stage.json"), err)
	}
	return &info, nil
}

// stage returns the rootfs of the stage of spec, building it if needed:
// with debootstrap, or for a derived spec from its parent's stage (which
// it builds first if needed).
func (b *Builder) stage(ctx context.Context, bl *build, spec airlock.ImageSpec, stageHash string) (string, error) {
	dir := filepath.Join(b.stagesDir(), stageHash)
	rootfs := filepath.Join(dir, "rootfs")
	if _, err := os.Stat(filepath.Join(dir, "stage.json")); err == nil {
		if fi, err := os.Stat(rootfs); err == nil && fi.IsDir() {
			bl.step("reusing stage %s", Short(stageHash))
			return rootfs, nil
		}
	}
	var parent airlock.ImageSpec
	var parentHash, parentRootfs, mirror string
	if spec.From != "" {
		p, err := parentSpec(spec)
		if err != nil {
			return "", err
		}
		parent, parentHash = p, StageHash(p)
		bl.step("stage %s starts from the stage %s of %s", Short(stageHash), Short(parentHash), parent.Name)
		if parentRootfs, err = b.stage(ctx, bl, parent, parentHash); err != nil {
			return "", fmt.Errorf("the stage of %s: %w", parent.Name, err)
		}
		if mirror, err = b.deriveMirror(filepath.Dir(parentRootfs)); err != nil {
			return "", err
		}
	} else {
		mirror = b.cfg.Mirror
		if mirror == "" {
			m, err := HostMirror(b.cfg.AptDir, spec.Suite)
			if err != nil {
				return "", err
			}
			mirror = m
		}
	}
	if err := os.MkdirAll(b.stagesDir(), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(b.tmpDir(), "stage-"+Short(stageHash)+"-")
	if err != nil {
		return "", err
	}
	ok := false
	defer func() {
		if !ok {
			removeTree(tmp)
		}
	}()
	// debootstrap runs maintainer scripts in the target; 0755 so they
	// can traverse to it as any user.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	troot := filepath.Join(tmp, "rootfs")
	info := stageInfo{
		StageHash: stageHash,
		Recipe:    RecipeVersion,
		Spec:      spec,
		Mirror:    mirror,
	}

	t0 := time.Now()
	if spec.From != "" {
		if err := b.deriveStage(ctx, bl, spec, parent, parentRootfs, troot, mirror); err != nil {
			return "", err
		}
		info.Parent = parentHash
		info.DeriveSeconds = time.Since(t0).Seconds()
		bl.step("derived from %s's stage in %.1fs", parent.Name, info.DeriveSeconds)
	} else {
		bl.step("debootstrap %s from %s (%d packages; this takes minutes)", spec.Suite, mirror, len(spec.Packages))
		if err := b.debootstrap(ctx, spec, troot, mirror); err != nil {
			return "", err
		}
		info.DebootstrapSeconds = time.Since(t0).Seconds()
		bl.step("debootstrap done in %.1fs", info.DebootstrapSeconds)
	}

	if err := applyRecipe(ctx, bl, spec, troot); err != nil {
		return "", err
	}
	info.BuiltAt = time.Now().UTC().Truncate(time.Second)
	if err := writeJSON(filepath.Join(tmp, "stage.json"), info); err != nil {
		return "", err
	}
	if _, err := os.Lstat(dir); err == nil { // incomplete leftover
		old := filepath.Join(b.tmpDir(), fmt.Sprintf("old-stage-%d", time.Now().UnixNano()))
		if err := os.Rename(dir, old); err != nil {
			return "", err
		}
		removeTree(old)
	}
	syncAll()
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	ok = true
	syncDir(b.stagesDir())
	bl.step("stage %s ready", Short(stageHash))
	return rootfs, nil
}

// debootstrap runs debootstrap into rootfs, streaming its output to the
// progress writer. On cancellation it gets SIGTERM first, so that it can
// unmount what it mounted in the target.
func (b *Builder) debootstrap(ctx context.Context, spec airlock.ImageSpec, rootfs, mirror string) error {
	args := []string{
		"--variant=minbase",
		"--include=" + strings.Join(spec.Packages, ","),
		"--components=main",
		spec.Suite, rootfs, mirror,
	}
	cmd := exec.CommandContext(ctx, b.cfg.Debootstrap, args...)
	return b.runInstaller(ctx, cmd, "  debootstrap| ", "debootstrap "+spec.Suite)
}

// runInstaller runs cmd, a tool that installs Debian packages into a tree
// (debootstrap, or a derived stage's installer), in a process group of
// its own with a non-interactive environment plus env, its output
// streamed to the progress writer with prefix. On cancellation the group
// gets SIGTERM first, so that the tool can unmount what it mounted in the
// target; at the end whatever is left of the group (dpkg, wget) gets
// SIGKILL, so that nothing goes on writing into a tree the caller may be
// about to remove. A failure is ctx's error when cancelled, else what
// failed with the tail of the tool's output.
func (b *Builder) runInstaller(ctx context.Context, cmd *exec.Cmd, prefix, what string, env ...string) error {
	cmd.Env = append(append(os.Environ(),
		"LC_ALL=C", "LANGUAGE=", "DEBIAN_FRONTEND=noninteractive",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	out := newPrefixWriter(b.cfg.Progress, prefix, 15)
	cmd.Stdout = out
	cmd.Stderr = out
	err := cmd.Run()
	out.Flush()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s: %w; last output:\n%s", what, err, out.Tail())
	}
	return nil
}

// installAgent writes the agent into rootfs as a new file: a hard-linked
// file of the stage is replaced, never written through. It checks that
// what it wrote has the sha256 the image is named by.
func installAgent(src, rootfs, wantSum string) error {
	dst := filepath.Join(rootfs, AgentPath)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	// The mount point of the agent's channel directory (a backend binds
	// a host directory of the sandbox's own there).
	if err := os.MkdirAll(filepath.Join(rootfs, ChannelDir), 0o755); err != nil {
		return err
	}
	// /home/user names the workspace too: the E2B API's home and working
	// directory (the sandbox's own paths stay /workspace).
	if err := homeLink(rootfs); err != nil {
		return err
	}
	if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("install agent: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != wantSum {
		return fmt.Errorf("install agent: %s changed during the build (sha256 %s, want %s)", src, Short(got), Short(wantSum))
	}
	if err := os.Chmod(dst, 0o755); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		return os.Lchown(dst, 0, 0)
	}
	return nil
}

// run runs a command, returning its combined output in the error.
func run(ctx context.Context, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = env
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		f.Sync()
		f.Close()
	}
}

// prefixWriter writes each line to w with a prefix and keeps the last
// lines for an error message.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
	tail   []string
	keep   int
}

func newPrefixWriter(w io.Writer, prefix string, keep int) *prefixWriter {
	return &prefixWriter{w: w, prefix: prefix, keep: keep}
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		p.line(string(p.buf[:i]))
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

func (p *prefixWriter) line(s string) {
	s = strings.TrimRight(s, "\r")
	fmt.Fprintf(p.w, "%s%s\n", p.prefix, s)
	p.tail = append(p.tail, s)
	if len(p.tail) > p.keep {
		p.tail = p.tail[1:]
	}
}

// Flush writes a last unterminated line.
func (p *prefixWriter) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		p.line(string(p.buf))
		p.buf = nil
	}
}

// Tail returns the last lines written.
func (p *prefixWriter) Tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// HumanSize formats n bytes as "312.4 MiB".
func HumanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= unit
		if v < unit || u == "TiB" {
			return fmt.Sprintf("%.1f %s", v, u)
		}
	}
	panic("unreachable")
}

// HomeLink is the symlink every image has at /home/user, to Workspace.
const HomeLink = "/home/user"

// homeLink makes HomeLink in rootfs (a hard-link copy of the stage, so
// the stage itself is untouched).
func homeLink(rootfs string) error {
	p := filepath.Join(rootfs, HomeLink)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.Symlink(Workspace, p)
}
