package dockerfile

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/loopdisk"
	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/service/template"
)

// cacheVersion changes whenever layers made before can no longer be
// reused (a change to how steps run or how keys are computed).
const cacheVersion = "airlock-dockerfile/1"

// agentPath is where every image holds the agent.
const agentPath = "opt/airlock/bin/airlock-agent"

// DefaultStepLimits bound each RUN step.
var DefaultStepLimits = airlock.Limits{
	CPUs:        1,
	MemoryBytes: 1 << 30,
	Pids:        512,
	Timeout:     10 * time.Minute,
}

// Config configures a Builder.
type Config struct {
	// Dir is the build cache: Dir/layers, Dir/rootfs, Dir/tmp. It must
	// be on one file system with the images FROM names (final rootfs
	// trees are hard links into them).
	Dir string
	// Runner runs RUN steps (the gvisor backend).
	Runner airlock.BuildRunner
	// Egress makes the network of a RUN step of a build that asks for
	// one (Request.Network); nil: such builds are refused.
	Egress airlock.Egress
	// ResolveFrom finds the image FROM names: one of ours (base,
	// python-ds) or a template. Request.ResolveFrom overrides it; one
	// of them must be set.
	ResolveFrom func(ctx context.Context, ref string) (*airlock.Image, error)
	// Limits bound the Dockerfile.
	Limits Limits
	// StepLimits bound each RUN (DefaultStepLimits when zero).
	StepLimits airlock.Limits
	// Secrets scans each new layer and the final environment; default
	// secretscan.Default().
	Secrets *secretscan.Scanner
	Logger  *slog.Logger
}

// Validate fills defaults and checks c.
func (c *Config) Validate() error {
	if c.Dir == "" || !filepath.IsAbs(c.Dir) {
		return errors.New("dockerfile builder: Dir must be an absolute path")
	}
	if strings.ContainsAny(c.Dir, ",:\\") {
		return fmt.Errorf("dockerfile builder: Dir %q holds a character an overlay mount cannot take", c.Dir)
	}
	if c.Runner == nil {
		return errors.New("dockerfile builder: no Runner")
	}
	if c.StepLimits == (airlock.Limits{}) {
		c.StepLimits = DefaultStepLimits
	}
	if c.Secrets == nil {
		c.Secrets = secretscan.Default()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Limits.fill()
	return nil
}

// Builder builds root filesystems from Dockerfiles, caching each
// step's result by the digest of its inputs.
type Builder struct {
	cfg Config
}

// New validates cfg, makes the cache directories and removes what a
// crashed build left in Dir/tmp (unmounting its overlays first).
func New(cfg Config) (*Builder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Builder{cfg: cfg}
	tmp := b.tmpDir()
	if _, err := os.Stat(tmp); err == nil {
		if err := loopdisk.UnmountAll(tmp); err != nil {
			return nil, fmt.Errorf("dockerfile builder: %w", err)
		}
		if err := os.RemoveAll(tmp); err != nil {
			return nil, fmt.Errorf("dockerfile builder: %w", err)
		}
	}
	for _, d := range []string{b.layersDir(), b.rootfsDir(), tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("dockerfile builder: %w", err)
		}
	}
	return b, nil
}

func (b *Builder) layersDir() string { return filepath.Join(b.cfg.Dir, "layers") }
func (b *Builder) rootfsDir() string { return filepath.Join(b.cfg.Dir, "rootfs") }
func (b *Builder) tmpDir() string    { return filepath.Join(b.cfg.Dir, "tmp") }

// Request is one build.
type Request struct {
	Dockerfile []byte
	// ContextDir is the unpacked build context COPY and ADD read from
	// (only through an os.Root: nothing outside it is read). Empty: no
	// context, and COPY fails.
	ContextDir string
	BuildArgs  map[string]string
	// Log receives the build log: one line per step and the output of
	// each RUN.
	Log io.Writer
	// NoCache runs every step again (and replaces cached results).
	NoCache bool
	// ResolveFrom, if set, finds FROM's image for this build instead
	// of Config.ResolveFrom (a tenant's templates, say).
	ResolveFrom func(ctx context.Context, ref string) (*airlock.Image, error)
	// Network, when set, gives every RUN step a network of its own,
	// made by Config.Egress under this request (its policy's allow list,
	// its tenant's egress budget) and removed when the step ends. Its
	// allow list is part of each RUN step's cache key. Nil: RUN steps
	// have no network.
	Network *airlock.NetworkRequest
}

// StepReport says how one instruction went.
type StepReport struct {
	Index      int    `json:"index"`
	Line       int    `json:"line"`
	Text       string `json:"text"`
	Cached     bool   `json:"cached"`
	DurationMS int64  `json:"duration_ms"`
}

// Result is a finished build.
type Result struct {
	// Key is the digest of everything the rootfs was made from.
	Key string
	// Rootfs is the built tree, Dir/rootfs/<key>/rootfs: read-only by
	// convention, its files hard links into the cache and the base image.
	Rootfs string
	From   *airlock.Image
	// Env, User and Workdir are the image configuration after the last
	// instruction; UID and GID are User resolved in the built rootfs.
	Env      []string
	User     string
	UID, GID uint32
	Workdir  string
	Steps    []StepReport
	Duration time.Duration
	// Uses are the cache entries the result was made from (absolute
	// directories): FROM's image, each step's layer and the flattened
	// result. The garbage collector keeps those a template lists.
	Uses []string
}

// Image is the result as an image sandboxes can run.
func (r *Result) Image(name string) *airlock.Image {
	return &airlock.Image{Name: name, Hash: r.Key, Rootfs: r.Rootfs, Env: slices.Clone(r.Env), BuiltAt: time.Now().UTC()}
}

// layerMeta is Dir/layers/<key>/layer.json.
type layerMeta struct {
	Key       string    `json:"key"`
	Parent    string    `json:"parent"`
	Line      int       `json:"line"`
	Text      string    `json:"text"`
	CreatedAt time.Time `json:"created_at"`
}

// Build parses and runs req.Dockerfile. A Dockerfile error is a
// *LineError; a step that fails is a *StepError (with its line and,
// for RUN, the exit code); both also say so in the log.
func (b *Builder) Build(ctx context.Context, req Request) (*Result, error) {
	start := time.Now()
	log := req.Log
	if log == nil {
		log = io.Discard
	}
	d, err := Parse(req.Dockerfile, b.cfg.Limits)
	if err != nil {
		fmt.Fprintf(log, "error: %v\n", err)
		return nil, err
	}
	allow, err := b.networkOf(req.Network)
	if err != nil {
		fmt.Fprintf(log, "error: %v\n", err)
		return nil, err
	}
	ref, err := d.FromRef(req.BuildArgs)
	if err != nil {
		fmt.Fprintf(log, "error: %v\n", err)
		return nil, err
	}
	total := len(d.Steps) + 1
	fmt.Fprintf(log, "#1/%d [line %d] FROM %s\n", total, d.FromLine, ref)
	resolve := b.cfg.ResolveFrom
	if req.ResolveFrom != nil {
		resolve = req.ResolveFrom
	}
	if resolve == nil {
		return nil, errors.New("dockerfile builder: no ResolveFrom")
	}
	from, err := resolve(ctx, ref)
	if err != nil {
		err = &LineError{Line: d.FromLine, Instruction: "FROM", Msg: fmt.Sprintf("%s: %v", ref, err), Err: errors.Join(ErrInvalid, err)}
		fmt.Fprintf(log, "error: %v\n", err)
		return nil, err
	}
	steps, final, err := d.Expand(from.Env, req.BuildArgs)
	if err != nil {
		fmt.Fprintf(log, "error: %v\n", err)
		return nil, err
	}
	if fs := b.cfg.Secrets.ScanEnv(final.Env); len(fs) > 0 {
		if rerr := secretscan.Refusal("the image's environment", fs); rerr != nil {
			err := fmt.Errorf("%w: %v", ErrSecret, rerr)
			fmt.Fprintf(log, "error: %v\n", err)
			return nil, err
		}
	}
	var ctxRoot *os.Root
	if req.ContextDir != "" {
		if ctxRoot, err = os.OpenRoot(req.ContextDir); err != nil {
			return nil, fmt.Errorf("build context: %w", err)
		}
		defer ctxRoot.Close()
	}

	// The build's claim on what it uses, so that the garbage collector
	// leaves it alone while the build runs (template.Pin).
	pin, err := template.NewPin(template.PinsDir(b.cfg.Dir))
	if err != nil {
		return nil, err
	}
	defer pin.Release()
	res := &Result{From: from, Env: final.Env, User: final.User, Workdir: final.Workdir}
	if err := res.use(pin, filepath.Dir(from.Rootfs)); err != nil {
		return nil, err
	}
	res.Steps = append(res.Steps, StepReport{Index: 0, Line: d.FromLine, Text: "FROM " + ref, Cached: true})
	key := digest(cacheVersion, "from", from.Hash, from.Rootfs)
	var layers []string // diff directories, oldest first
	for _, st := range steps {
		t0 := time.Now()
		rep := StepReport{Index: st.Index, Line: st.Line, Text: st.Text}
		fmt.Fprintf(log, "#%d/%d [line %d] %s\n", st.Index+1, total, st.Line, st.Text)
		if !st.Layered() {
			rep.Cached = true
			res.Steps = append(res.Steps, rep)
			continue
		}
		var srcs []source
		extra := ""
		if st.Name == "COPY" || st.Name == "ADD" {
			if ctxRoot == nil {
				return nil, b.stepErr(log, st, -1, "no build context was given", nil)
			}
			if srcs, err = planCopy(ctxRoot, st); err != nil {
				return nil, b.stepErr(log, st, -1, err.Error(), err)
			}
			if extra, err = digestCopy(ctxRoot, srcs, st); err != nil {
				return nil, b.stepErr(log, st, -1, err.Error(), err)
			}
		}
		parent := key
		key = digest(parent, stepKey(st, allow), extra)
		dir := filepath.Join(b.layersDir(), key[:32])
		if err := res.use(pin, dir); err != nil {
			return nil, err
		}
		if !req.NoCache && exists(filepath.Join(dir, "layer.json")) {
			now := time.Now()
			os.Chtimes(filepath.Join(dir, "layer.json"), now, now) // last use, for Prune
			layers = append(layers, filepath.Join(dir, "diff"))
			rep.Cached = true
			fmt.Fprintf(log, "#%d CACHED\n", st.Index+1)
			res.Steps = append(res.Steps, rep)
			continue
		}
		if err := b.runStep(ctx, st, from.Rootfs, layers, ctxRoot, srcs, parent, key, dir, req.Network, log); err != nil {
			return nil, err
		}
		layers = append(layers, filepath.Join(dir, "diff"))
		rep.DurationMS = time.Since(t0).Milliseconds()
		fmt.Fprintf(log, "#%d DONE %.1fs\n", st.Index+1, time.Since(t0).Seconds())
		res.Steps = append(res.Steps, rep)
	}
	res.Key = key
	t0 := time.Now()
	if err := res.use(pin, filepath.Join(b.rootfsDir(), key[:32])); err != nil {
		return nil, err
	}
	rootfs, err := b.finalRootfs(ctx, key, from.Rootfs, layers, req.NoCache)
	if err != nil {
		fmt.Fprintf(log, "error: %v\n", err)
		return nil, err
	}
	res.Rootfs = rootfs
	fmt.Fprintf(log, "rootfs %s ready in %.1fs\n", key[:12], time.Since(t0).Seconds())
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if res.UID, res.GID, err = lookupUser(root, final.User); err != nil {
		err = &LineError{Msg: "USER " + final.User + ": " + err.Error(), Err: ErrInvalid}
		fmt.Fprintf(log, "error: %v\n", err)
		return nil, err
	}
	res.Duration = time.Since(start)
	fmt.Fprintf(log, "built %s in %.1fs\n", key[:12], res.Duration.Seconds())
	return res, nil
}

// use records a cache entry the build uses, claimed before the build
// looks at it.
func (r *Result) use(pin *template.Pin, dir string) error {
	r.Uses = append(r.Uses, dir)
	return pin.Add(dir)
}

func (b *Builder) stepErr(log io.Writer, st Step, exit int, msg string, cause error) error {
	err := &StepError{Step: st.Index, Line: st.Line, Text: st.Text, ExitCode: exit, Msg: msg, Err: cause}
	fmt.Fprintf(log, "error: %v\n", err)
	return err
}

// runStep runs one layered step on an overlay of the layers before it
// and moves its upper directory into the cache as Dir/layers/<key>.
func (b *Builder) runStep(ctx context.Context, st Step, base string, layers []string, ctxRoot *os.Root,
	srcs []source, parent, key, dir string, network *airlock.NetworkRequest, log io.Writer) (err error) {
	tmp, err := os.MkdirTemp(b.tmpDir(), "step-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	layer := filepath.Join(tmp, "layer")
	upper, work, merged := filepath.Join(layer, "diff"), filepath.Join(tmp, "work"), filepath.Join(tmp, "merged")
	for _, d := range []string{layer, upper, work, merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	lowers := []string{base}
	for _, l := range layers {
		lowers = append([]string{l}, lowers...)
	}
	if err := mountOverlay(lowers, upper, work, merged); err != nil {
		return b.stepErr(log, st, -1, err.Error(), err)
	}
	mounted := true
	defer func() {
		if mounted {
			if uerr := unmount(merged); uerr != nil && err == nil {
				err = uerr
			}
		}
	}()
	root, err := os.OpenRoot(merged)
	if err != nil {
		return err
	}
	uid, gid, uerr := lookupUser(root, st.User)
	switch st.Name {
	case "RUN":
		if uerr != nil {
			root.Close()
			return b.stepErr(log, st, -1, uerr.Error(), ErrInvalid)
		}
		if fi, err := root.Stat(strings.TrimPrefix(st.Workdir, "/")); st.Workdir != "/" && (err != nil || !fi.IsDir()) {
			root.Close()
			return b.stepErr(log, st, -1, "working directory "+st.Workdir+" does not exist", ErrInvalid)
		}
		root.Close()
		lim := b.cfg.StepLimits
		exit, err := b.run(ctx, airlock.BuildStep{
			ID: "build-" + key[:12] + "-" + randHex(4), Rootfs: merged, Args: st.Argv, Env: st.Env,
			Cwd: st.Workdir, UID: uid, GID: gid, Limits: lim, Output: log,
		}, network, log)
		if err != nil {
			if ctx.Err() == nil && lim.Timeout > 0 && errors.Is(err, context.DeadlineExceeded) {
				return b.stepErr(log, st, -1, fmt.Sprintf("timed out after %s", lim.Timeout), err)
			}
			return b.stepErr(log, st, -1, err.Error(), err)
		}
		if exit != 0 {
			return b.stepErr(log, st, exit, "", nil)
		}
	case "COPY", "ADD":
		cuid, cgid, err := chownOf(root, st)
		if err == nil {
			var mode os.FileMode
			var has bool
			if mode, has, err = parseChmod(st.Chmod); err == nil {
				err = applyCopy(ctxRoot, root, srcs, cuid, cgid, mode, has)
			}
		}
		root.Close()
		if err != nil {
			return b.stepErr(log, st, -1, err.Error(), err)
		}
	case "WORKDIR":
		err := makeWorkdir(root, strings.TrimPrefix(st.Dest, "/"), int(uid), int(gid), uerr == nil)
		root.Close()
		if err != nil {
			return b.stepErr(log, st, -1, err.Error(), err)
		}
	}
	mounted = false
	if err := unmount(merged); err != nil {
		return err
	}
	rep, err := b.cfg.Secrets.ScanTree(ctx, upper, secretscan.ModeFiles)
	if err != nil {
		return err
	}
	if rerr := rep.Err(fmt.Sprintf("line %d", st.Line)); rerr != nil {
		return b.stepErr(log, st, -1, rerr.Error(), errors.Join(ErrSecret, rerr))
	}
	meta, _ := json.Marshal(layerMeta{Key: key, Parent: parent, Line: st.Line, Text: st.Text, CreatedAt: time.Now().UTC()})
	if err := os.WriteFile(filepath.Join(layer, "layer.json"), meta, 0o600); err != nil {
		return err
	}
	os.RemoveAll(dir) // NoCache: replace the old result
	if err := os.Rename(layer, dir); err != nil && !exists(filepath.Join(dir, "layer.json")) {
		return err
	}
	return nil
}

// makeWorkdir makes WORKDIR's directory when missing, owned by the
// USER in effect (as BuildKit does).
func makeWorkdir(root *os.Root, p string, uid, gid int, chown bool) error {
	if p == "" {
		return nil
	}
	if fi, err := root.Stat(p); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("/%s is not a directory", p)
		}
		return nil
	}
	if err := root.MkdirAll(p, 0o755); err != nil {
		return err
	}
	if chown {
		return root.Lchown(p, uid, gid)
	}
	return nil
}

// finalRootfs flattens base and layers into Dir/rootfs/<key>/rootfs
// (or finds it there), with the base image's agent in place.
func (b *Builder) finalRootfs(ctx context.Context, key, base string, layers []string, noCache bool) (string, error) {
	dir := filepath.Join(b.rootfsDir(), key[:32])
	rootfs := filepath.Join(dir, "rootfs")
	if !noCache && exists(filepath.Join(dir, "rootfs.json")) {
		now := time.Now()
		os.Chtimes(filepath.Join(dir, "rootfs.json"), now, now)
		return rootfs, nil
	}
	tmp, err := os.MkdirTemp(b.tmpDir(), "rootfs-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "rootfs")
	if err := linkTree(ctx, base, out); err != nil {
		return "", fmt.Errorf("flatten: %w", err)
	}
	for _, l := range layers {
		if err := applyLayer(ctx, l, out); err != nil {
			return "", fmt.Errorf("flatten %s: %w", filepath.Base(filepath.Dir(l)), err)
		}
	}
	if err := restoreAgent(base, out); err != nil {
		return "", err
	}
	meta, _ := json.Marshal(map[string]any{"key": key, "created_at": time.Now().UTC()})
	if err := os.WriteFile(filepath.Join(tmp, "rootfs.json"), meta, 0o600); err != nil {
		return "", err
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil && !exists(filepath.Join(dir, "rootfs.json")) {
		return "", err
	}
	return rootfs, nil
}

// restoreAgent puts the base image's agent back, whatever the steps
// did to it: the sandbox's first process must be ours.
func restoreAgent(base, out string) error {
	src := filepath.Join(base, agentPath)
	if !exists(src) {
		return nil // an image without our agent (a test tree)
	}
	root, err := os.OpenRoot(out)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.MkdirAll(filepath.Dir(agentPath), 0o755); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := root.RemoveAll(agentPath); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return linkInto(root, src, agentPath)
}

// stepKey is the text of a step's inputs that its cache key covers: for
// a RUN of a build with a network, its allow list too (normalised and
// sorted). Without one the text is what it was before networks were.
func stepKey(st Step, allow []string) string {
	if st.Name != "RUN" {
		allow = nil
	}
	b, _ := json.Marshal(struct {
		Name, User, Workdir, Dest, Chown, Chmod string
		Argv, Env, Sources                      []string
		Allow                                   []string `json:",omitempty"`
	}{st.Name, st.User, st.Workdir, st.Dest, st.Chown, st.Chmod, st.Argv, st.Env, st.Sources, allow})
	return string(b)
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
