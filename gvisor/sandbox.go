package gvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/cgroups"
	"github.com/airlockhq/airlock/internal/sandboxio"
	"github.com/airlockhq/airlock/protocol"
)

// maxLogBytes caps what the sandbox's own stderr (runsc and agent logs)
// may write to the host; the rest is discarded.
const maxLogBytes = 256 << 10

// Sandbox is one runsc sandbox.
type Sandbox struct {
	b      *Backend
	id     string
	dir    string
	cgroup string

	cmd    *exec.Cmd
	agent  *protocol.Client
	exited chan struct{} // closed when `runsc run` has exited

	destroyOnce sync.Once
	destroyErr  error
}

var _ airlock.Sandbox = (*Sandbox)(nil)

// ID of the sandbox (also its runsc container ID).
func (s *Sandbox) ID() string { return s.id }

// Agent is the connection to the agent.
func (s *Sandbox) Agent() *protocol.Client { return s.agent }

// WorkspaceDir is the host directory behind /workspace.
func (s *Sandbox) WorkspaceDir() string { return filepath.Join(s.dir, "disk", "workspace") }

// Done is closed when the sandbox has exited.
func (s *Sandbox) Done() <-chan struct{} { return s.exited }

// start makes the sandbox's host resources and starts it: a fresh boot
// with `runsc run`, or, when from is a checkpoint directory, `runsc
// restore` of that checkpoint.
func (s *Sandbox) start(ctx context.Context, spec airlock.SandboxSpec, from string) error {
	if err := os.Mkdir(s.dir, 0o700); err != nil {
		return fmt.Errorf("gvisor: %w", err)
	}
	labels, _ := json.Marshal(spec.Labels)
	os.WriteFile(filepath.Join(s.dir, "labels.json"), labels, 0o600)

	disk := filepath.Join(s.dir, "disk")
	bundle := filepath.Join(s.dir, "bundle")
	for _, d := range []string{disk, bundle} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("gvisor: %w", err)
		}
	}
	if err := mountDisk(ctx, disk, filepath.Join(s.dir, "disk.img"), spec.Limits.DiskBytes); err != nil {
		return err
	}
	workspace, tmp := filepath.Join(disk, "workspace"), filepath.Join(disk, "tmp")
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

	if err := s.b.cgroups.Create(s.cgroup, cgroups.Limits{
		MemoryBytes: spec.Limits.MemoryBytes,
		CPUs:        spec.Limits.CPUs,
		Pids:        hostPidsBackstop,
	}); err != nil {
		return err
	}
	oci := ociSpec(&s.b.cfg, spec, s.cgroup, workspace, tmp)
	if err := applyNetwork(oci, spec.Network, s.dir); err != nil {
		return err
	}
	if err := writeBundle(bundle, oci); err != nil {
		return err
	}

	logf, err := os.OpenFile(filepath.Join(s.dir, "sandbox.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("gvisor: %w", err)
	}
	defer logf.Close()
	args := append(s.b.globalFlags(), networkFlags(spec.Network)...)
	if s.b.cfg.DebugLogs {
		args = append(args, "--debug", "--debug-log", filepath.Join(s.dir, "debug")+"/")
	}
	if from == "" {
		args = append(args, "run", "--bundle", bundle, s.id)
	} else {
		// --background lets the sandbox run while its memory is still
		// being loaded from the (uncompressed) checkpoint.
		args = append(args, "restore", "--background", "--image-path", from, "--bundle", bundle, s.id)
	}
	cmd := exec.Command(s.b.cfg.Runsc, args...)
	cmd.Dir = s.dir
	cmd.Stderr = &sandboxio.CappedWriter{W: logf, N: maxLogBytes}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("gvisor: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("gvisor: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("gvisor: start runsc: %w", err)
	}
	s.cmd = cmd
	s.agent = protocol.NewClient(sandboxio.PipeConn{ReadCloser: stdout, W: stdin})
	go func() {
		// Read the agent until EOF before Wait closes the pipe under it.
		<-s.agent.Done()
		cmd.Wait()
		close(s.exited)
	}()
	hctx, cancel := context.WithTimeout(ctx, s.b.cfg.StartTimeout)
	defer cancel()
	if from != "" {
		// A restored agent said its hello before the checkpoint; it
		// answers a health request once it runs again.
		if _, err := s.agent.Health(hctx); err != nil {
			return fmt.Errorf("gvisor: sandbox %s did not restore: %w (log: %s)", s.id, err, s.logTail())
		}
		return nil
	}
	if _, err := s.agent.WaitHello(hctx); err != nil {
		return fmt.Errorf("gvisor: sandbox %s did not start: %w (log: %s)", s.id, err, s.logTail())
	}
	return nil
}

// logTail returns the end of the sandbox's log, for error messages.
func (s *Sandbox) logTail() string { return sandboxio.LogTail(filepath.Join(s.dir, "sandbox.log")) }

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
	if s.cmd == nil {
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
// immediate and costs no runsc call; `runsc kill` and the process group are
// fallbacks.
func (s *Sandbox) kill(ctx context.Context) error {
	if s.cmd == nil {
		return nil
	}
	select {
	case <-s.exited:
		return nil
	default:
	}
	s.b.cgroups.Kill(s.cgroup)
	// Stopped means no process of the sandbox runs any more: once its
	// cgroup is empty nothing inside can change a file. `runsc run`
	// tidies up after that; Destroy waits for it.
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
	case <-time.After(3 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		s.b.cgroups.Kill(s.cgroup)
	}
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
	if s.cmd != nil {
		if err := s.kill(ctx); err != nil {
			errs = append(errs, err)
		}
		if s.agent != nil {
			s.agent.Close()
		}
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
	}
	if _, err := s.b.runsc(ctx, "delete", "--force", s.id); err != nil && s.cmd != nil {
		// runsc deletes the container itself when `run` ends; only a
		// container it still lists is an error.
		if ids, lerr := s.b.listContainers(ctx); lerr == nil && contains(ids, s.id) {
			errs = append(errs, err)
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
	}
	return errors.Join(errs...)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}
