package gvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/internal/cgroups"
	"github.com/airlockhq/airlock/internal/sandboxio"
)

// maxLogBytes caps what the sandbox's own stderr (runsc and agent logs)
// may write to the host; the rest is discarded.
const maxLogBytes = 256 << 10

// runDetachedLimit bounds a `runsc run --detach` or restore, which the
// caller's cancellation does not interrupt (see runDetached): only a
// runsc that hangs is killed.
const runDetachedLimit = 2 * time.Minute

// Sandbox is one runsc sandbox.
type Sandbox struct {
	b      *Backend
	id     string
	dir    string
	cgroup string
	labels map[string]string
	env    []string // the agent's, from the OCI spec (nil when reattached)
	disk   string   // a paused sandbox's disk image to mount (resume), or ""

	agent   *protocol.Client
	started bool          // runsc made the container: destroy must delete it
	exited  chan struct{} // closed when the sandbox process has exited
	exitOne sync.Once
	pids    []int // the sandbox process and its gofer, once watched

	destroyOnce sync.Once
	destroyErr  error
}

var (
	_ airlock.Sandbox     = (*Sandbox)(nil)
	_ airlock.Detacher    = (*Sandbox)(nil)
	_ airlock.Labeled     = (*Sandbox)(nil)
	_ airlock.EnvReporter = (*Sandbox)(nil)
)

// ID of the sandbox (also its runsc container ID).
func (s *Sandbox) ID() string { return s.id }

// Agent is the connection to the agent.
func (s *Sandbox) Agent() airlock.Agent { return s.agent }

// WorkspaceDir is the host directory behind /workspace.
func (s *Sandbox) WorkspaceDir() string { return filepath.Join(s.dir, "disk", "workspace") }

// Done is closed when the sandbox has exited.
func (s *Sandbox) Done() <-chan struct{} { return s.exited }

// Labels are the labels the sandbox was created with.
func (s *Sandbox) Labels() map[string]string { return s.labels }

// Env is the environment the agent was started with (the OCI spec's);
// nil for a sandbox reattached after a restart.
func (s *Sandbox) Env() []string { return slices.Clone(s.env) }

func (s *Sandbox) markExited() { s.exitOne.Do(func() { close(s.exited) }) }

// start makes the sandbox's host resources and starts it: a fresh boot
// with `runsc run`, or, when from is a checkpoint directory, `runsc
// restore` of that checkpoint. Both detach: the sandbox does not depend
// on this process (see process_linux.go and channel.go).
func (s *Sandbox) start(ctx context.Context, spec airlock.SandboxSpec, from string) error {
	if err := os.Mkdir(s.dir, 0o700); err != nil {
		return fmt.Errorf("gvisor: %w", err)
	}
	s.labels = spec.Labels
	labels, _ := json.Marshal(spec.Labels)
	os.WriteFile(filepath.Join(s.dir, "labels.json"), labels, 0o600)

	disk := filepath.Join(s.dir, "disk")
	bundle := filepath.Join(s.dir, "bundle")
	for _, d := range []string{disk, bundle} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("gvisor: %w", err)
		}
	}
	token, err := newChannel(s.dir)
	if err != nil {
		return err
	}
	workspace, tmp := filepath.Join(disk, "workspace"), filepath.Join(disk, "tmp")
	if s.disk != "" {
		// Resume: the paused sandbox's disk, with its workspace and /tmp
		// as they were (a hard link: the paused copy stays until the
		// resume has succeeded).
		if err := s.b.mountPausedDisk(ctx, disk, s.disk, filepath.Join(s.dir, "disk.img")); err != nil {
			return err
		}
	} else if err := s.b.mountDisk(ctx, disk, filepath.Join(s.dir, "disk.img"), spec.Limits.DiskBytes); err != nil {
		return err
	}
	if s.disk == "" { // a resumed disk has both as the paused sandbox left them
		if err := makeDiskDirs(workspace, tmp); err != nil {
			return err
		}
		// A restore gets the checkpoint's workspace and /tmp; a boot
		// (or a checkpoint that kept no disk) the image's workspace.
		loaded := false
		if from != "" {
			if loaded, err = loadDisk(ctx, from, workspace, tmp, spec.Limits.DiskBytes); err != nil {
				return err
			}
		}
		if !loaded {
			if err := seedWorkspace(ctx, spec.Image, workspace, spec.Limits.DiskBytes); err != nil {
				return err
			}
		}
	}

	if err := volumeMountPoints(spec, workspace, tmp); err != nil {
		return err
	}
	if err := s.b.cgroups.Create(s.cgroup, cgroups.Limits{
		MemoryBytes: spec.Limits.MemoryBytes,
		CPUs:        spec.Limits.CPUs,
		Pids:        hostPidsBackstop,
	}); err != nil {
		return err
	}
	oci := ociSpec(&s.b.cfg, spec, s.cgroup, workspace, tmp, chanDir(s.dir))
	s.env = slices.Clone(oci.Process.Env)
	if err := applyNetwork(oci, spec.Network, s.dir); err != nil {
		return err
	}
	if err := writeBundle(bundle, oci); err != nil {
		return err
	}

	args := append(s.b.globalFlags(), networkFlags(spec.Network)...)
	if s.b.cfg.DebugLogs {
		args = append(args, "--debug", "--debug-log", filepath.Join(s.dir, "debug")+"/")
	}
	if from == "" {
		args = append(args, "run", "--detach", "--bundle", bundle, s.id)
	} else {
		// --background lets the sandbox run while its memory is still
		// being loaded from the (uncompressed) checkpoint.
		args = append(args, "restore", "--detach", "--background", "--image-path", from, "--bundle", bundle, s.id)
	}
	agent, logDone, err := s.runDetached(ctx, args)
	if err != nil {
		return err
	}
	s.agent = agent
	if err := s.watchProcesses(); err != nil {
		return err
	}
	hctx, cancel := context.WithTimeout(ctx, s.b.cfg.StartTimeout)
	defer cancel()
	if from != "" {
		// A restored agent said its hello before the checkpoint; it
		// answers a health request once it runs again.
		if _, err := s.agent.Health(hctx); err != nil {
			return fmt.Errorf("gvisor: sandbox %s did not restore: %w (log: %s)", s.id, err, s.logTail(logDone))
		}
	} else if _, err := s.agent.WaitHello(hctx); err != nil {
		return fmt.Errorf("gvisor: sandbox %s did not start: %w (log: %s)", s.id, err, s.logTail(logDone))
	}
	return giveChannel(hctx, s.agent, token)
}

// volumeMountPoints makes the mount points of volumes below /workspace
// or /tmp on the sandbox's fresh disk (owned by the sandbox user), and
// checks that every other one is a directory of the image: runsc would
// otherwise make it in the image's root file system on the host, which
// every sandbox of the image shares.
func volumeMountPoints(spec airlock.SandboxSpec, workspace, tmp string) error {
	for _, v := range spec.Volumes {
		if err := airlock.ValidateVolumePath(v.Path); err != nil {
			return fmt.Errorf("gvisor: %w", err)
		}
		var base, rel string
		switch {
		case strings.HasPrefix(v.Path, "/workspace/"):
			base, rel = workspace, strings.TrimPrefix(v.Path, "/workspace/")
		case strings.HasPrefix(v.Path, "/tmp/"):
			base, rel = tmp, strings.TrimPrefix(v.Path, "/tmp/")
		default:
			if err := airlock.CheckVolumeMountPoint(spec.Image.Rootfs, v.Path); err != nil {
				return fmt.Errorf("gvisor: %w", err)
			}
			continue
		}
		// A fresh disk holds nothing the sandbox made: no link to follow.
		dir := base
		for _, part := range strings.Split(rel, "/") {
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("gvisor: volume mount point: %w", err)
			}
			if err := os.Lchown(dir, SandboxUID, SandboxUID); err != nil {
				return fmt.Errorf("gvisor: volume mount point: %w", err)
			}
		}
	}
	return nil
}

// makeDiskDirs makes a fresh disk's workspace (the sandbox user's) and
// /tmp (sticky, for everyone).
func makeDiskDirs(workspace, tmp string) error {
	if err := os.Mkdir(workspace, 0o755); err != nil {
		return fmt.Errorf("gvisor: %w", err)
	}
	if err := os.Chown(workspace, SandboxUID, SandboxUID); err != nil {
		return fmt.Errorf("gvisor: %w", err)
	}
	if err := os.Mkdir(tmp, 0o1777); err != nil {
		return fmt.Errorf("gvisor: %w", err)
	}
	if err := os.Chmod(tmp, 0o1777|os.ModeSticky); err != nil {
		return fmt.Errorf("gvisor: %w", err)
	}
	return nil
}

// runDetached runs `runsc run --detach` (or restore) with pipes of its
// own as the sandbox's stdio: the sandbox keeps its ends, this process
// the others. It returns the agent's connection over them and a channel
// closed once the sandbox's stderr has been copied into its log.
func (s *Sandbox) runDetached(ctx context.Context, args []string) (*protocol.Client, <-chan struct{}, error) {
	logf, err := os.OpenFile(filepath.Join(s.dir, "sandbox.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("gvisor: %w", err)
	}
	var files []*os.File
	pipe := func() (r, w *os.File) {
		if err == nil {
			r, w, err = os.Pipe()
			files = append(files, r, w)
		}
		return r, w
	}
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	if err != nil {
		logf.Close()
		for _, f := range files {
			f.Close()
		}
		return nil, nil, fmt.Errorf("gvisor: %w", err)
	}
	// The sandbox's stderr (runsc's complaints, the agent's log) goes to
	// its log file, capped, for as long as the sandbox writes.
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		defer logf.Close()
		io.Copy(&sandboxio.CappedWriter{W: logf, N: maxLogBytes}, errR)
		errR.Close()
	}()
	// A cancelled create does not kill runsc: killed while it writes its
	// record of the container, runsc leaves a truncated state file that
	// `runsc delete` then cannot read, and the container stays listed
	// (seen in TestCreateCancelledLeavesNothing). It returns once the
	// sandbox runs, in a fraction of a second; the cancellation is
	// answered after it, and the caller's destroy ends the sandbox.
	runCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runDetachedLimit)
	defer cancel()
	cmd := exec.CommandContext(runCtx, s.b.cfg.Runsc, args...)
	cmd.Dir = s.dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	runErr := cmd.Run()
	// The sandbox holds its own copies of its ends now.
	inR.Close()
	outW.Close()
	errW.Close()
	s.started = true
	agent := protocol.NewClient(sandboxio.PipeConn{ReadCloser: outR, W: inW})
	if runErr != nil {
		agent.Close()
		return nil, nil, fmt.Errorf("gvisor: runsc: %w (log: %s)", runErr, s.logTail(logDone))
	}
	if err := ctx.Err(); err != nil { // cancelled while runsc ran
		agent.Close()
		return nil, nil, fmt.Errorf("gvisor: %w", err)
	}
	return agent, logDone, nil
}

// watchProcesses closes Done when the sandbox's process exits, and reaps
// it and its gofer.
func (s *Sandbox) watchProcesses() error {
	sandbox, gofer, err := s.b.processes(s.id)
	if err != nil {
		return err
	}
	if err := watch(sandbox, s.markExited); err != nil {
		return err
	}
	s.pids = []int{sandbox}
	if gofer > 0 {
		if watch(gofer, func() {}) == nil { // it ends with the sandbox
			s.pids = append(s.pids, gofer)
		}
	}
	return nil
}

// logTail returns the end of the sandbox's log, for error messages, once
// what the sandbox wrote has reached it (or a moment has passed).
func (s *Sandbox) logTail(logDone <-chan struct{}) string {
	if logDone != nil {
		select {
		case <-logDone:
		case <-time.After(time.Second):
		}
	}
	return sandboxio.LogTail(filepath.Join(s.dir, "sandbox.log"))
}

// Stats reads the sandbox's cgroup.
func (s *Sandbox) Stats(ctx context.Context) (airlock.Stats, error) {
	st, err := s.b.cgroups.Stats(s.cgroup)
	if err != nil {
		return airlock.Stats{}, err
	}
	return sandboxio.Stats(st), nil
}

// Stop stops every process of the sandbox: it freezes the sandbox's cgroup
// (the gVisor kernel and its gofer), which takes a millisecond or two, and
// returns once all are stopped; nothing inside can change a file after
// that. Destroy kills them. Where freezing fails, Stop kills instead.
func (s *Sandbox) Stop(ctx context.Context) error {
	if !s.started {
		return nil
	}
	select {
	case <-s.exited:
		return nil
	default:
	}
	if err := s.b.cgroups.Freeze(s.cgroup); err == nil {
		return nil
	} else {
		s.b.cfg.Logger.Warn("freezing a sandbox failed; killing it", "sandbox", s.id, "err", err)
	}
	return s.kill(ctx)
}

// kill kills every process of the sandbox through its cgroup, which is
// immediate and costs no runsc call; `runsc kill` is the fallback.
func (s *Sandbox) kill(ctx context.Context) error {
	if !s.started {
		return nil
	}
	select {
	case <-s.exited:
		return nil
	default:
	}
	s.b.cgroups.Kill(s.cgroup)
	// Stopped means no process of the sandbox runs any more: once its
	// cgroup is empty nothing inside can change a file.
	for wait := 50 * time.Microsecond; wait < 2*time.Second; wait *= 2 {
		select {
		case <-s.exited:
			return nil
		case <-time.After(wait):
		}
		if s.b.cgroups.Empty(s.cgroup) {
			return nil
		}
	}
	s.b.runsc(ctx, "kill", "--all", s.id, "KILL")
	s.b.cgroups.Kill(s.cgroup)
	select {
	case <-s.exited:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("gvisor: sandbox %s did not stop", s.id)
	}
}

// Destroy kills the sandbox and removes everything it held on the host.
func (s *Sandbox) Destroy(ctx context.Context) error {
	s.destroyOnce.Do(func() { s.destroyErr = s.destroy(ctx) })
	return s.destroyErr
}

func (s *Sandbox) destroy(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	if err := s.kill(ctx); err != nil {
		errs = append(errs, err)
	}
	if s.agent != nil {
		s.agent.Close()
	}
	if s.started {
		if gone, err := s.removeRecordIfGone(); gone {
			if err != nil {
				errs = append(errs, err)
			}
		} else if err := s.b.deleter.delete(ctx, s.id); err != nil {
			if ids, lerr := s.b.listContainers(ctx); lerr != nil || contains(ids, s.id) {
				errs = append(errs, err)
			}
		}
	}
	if err := s.b.cgroups.Remove(s.cgroup); err != nil {
		errs = append(errs, err)
	}
	if err := unmountAll(s.dir); err != nil {
		errs = append(errs, err)
	} else if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		s.b.forget(s.id)
		return nil
	}
	// Logged here as well as returned: some callers drop the error (a
	// start that failed or was cancelled destroys what it made and
	// returns its own error), and what is left must still be visible.
	err := errors.Join(errs...)
	s.b.cfg.Logger.Warn("destroy: the sandbox is not fully gone; it stays listed until Reconcile ends it", "sandbox", s.id, "err", err)
	return err
}

// Detach lets go of the sandbox without ending it: the host's ends of its
// stdio are closed, so the agent goes on to dial its channel for the next
// airlockd (see channel.go), and the backend forgets it, so Reconcile of
// this process would end it. Destroy must not be called afterwards.
func (s *Sandbox) Detach() error {
	if s.agent != nil {
		s.agent.Close()
	}
	s.b.forget(s.id)
	return nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

var _ airlock.Killer = (*Sandbox)(nil)

// Kill ends every process of the sandbox (an abuse detector's response);
// the workspace stays until Destroy.
func (s *Sandbox) Kill(ctx context.Context) error { return s.kill(ctx) }

var _ airlock.CPUWaiter = (*Sandbox)(nil)

// CPUWait is how long the sandbox's host threads have waited for a CPU.
func (s *Sandbox) CPUWait(ctx context.Context) time.Duration { return s.b.cgroups.CPUWait(s.cgroup) }
