package namespaces

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/backend/namespaces/nsinit"
	"github.com/airlockhq/airlock/internal/cgroups"
	"github.com/airlockhq/airlock/internal/sandboxio"
)

// maxLogBytes caps what the sandbox's own stderr (the init stage's and
// the agent's logs) may write to the host; the rest is discarded.
const maxLogBytes = 256 << 10

// maxOpenFiles is RLIMIT_NOFILE inside the sandbox.
const maxOpenFiles = 4096

// agentTasks is room in the task limit for the agent's own threads, on top
// of the processes the sandbox's limit grants its programs.
const agentTasks = 32

// Sandbox is one namespaces sandbox.
type Sandbox struct {
	b       *Backend
	id      string
	dir     string // run directory; "" until the sandbox is configured
	cgroup  string // "" until the sandbox is configured
	uid     int    // host uid and gid of the sandbox user
	rootfs  string // the image whose agent binary runs the init stage
	logPath string

	cmd      *exec.Cmd
	agent    *protocol.Client
	exited   chan struct{} // closed when the sandbox's first process has exited
	configW  *os.File      // the init stage's config pipe, until sent
	reportR  *os.File      // the init stage's report pipe
	landlock int

	destroyOnce sync.Once
	destroyErr  error
}

var _ airlock.Sandbox = (*Sandbox)(nil)

// ID of the sandbox.
func (s *Sandbox) ID() string { return s.id }

// Agent is the connection to the agent.
func (s *Sandbox) Agent() airlock.Agent { return s.agent }

// WorkspaceDir is the host directory behind /workspace.
func (s *Sandbox) WorkspaceDir() string { return filepath.Join(s.dir, "disk", "workspace") }

// Done is closed when the sandbox has exited.
func (s *Sandbox) Done() <-chan struct{} { return s.exited }

// LandlockABI is the Landlock ABI version applied to the sandbox, 0 if
// none.
func (s *Sandbox) LandlockABI() int { return s.landlock }

// HostUID is the host uid the sandbox user is mapped to.
func (s *Sandbox) HostUID() int { return s.uid }

// spawn starts the init stage of a sandbox in its new namespaces, from
// the agent binary of the image at rootfs, as the host uid uid. It waits
// there, blocked on its config, until configure sends one: a started
// sandbox can wait in the pool of ready ones (prestart.go) with nothing
// of any request in it yet.
func (b *Backend) spawn(rootfs string, uid int, logPath string) (*Sandbox, error) {
	s := &Sandbox{b: b, uid: uid, rootfs: rootfs, logPath: logPath, exited: make(chan struct{})}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("namespaces: %w", err)
	}
	configR, configW, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("namespaces: %w", err)
	}
	reportR, reportW, err := os.Pipe()
	if err != nil {
		logf.Close()
		configR.Close()
		configW.Close()
		return nil, fmt.Errorf("namespaces: %w", err)
	}
	defer configR.Close()
	defer reportW.Close()
	fail := func(err error) (*Sandbox, error) {
		logf.Close()
		configW.Close()
		reportR.Close()
		return nil, err
	}
	cmd := exec.Command(filepath.Join(rootfs, b.cfg.AgentPath), nsinit.InitArg)
	cmd.Args[0] = b.cfg.AgentPath
	cmd.Dir = "/"
	cmd.Env = []string{}
	cmd.Stderr = &sandboxio.CappedWriter{W: logf, N: maxLogBytes}
	cmd.ExtraFiles = []*os.File{configR, reportW} // fds 3 and 4
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS |
			syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: SandboxUID, HostID: uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: SandboxUID, HostID: uid, Size: 1}},
		GidMappingsEnableSetgroups: true,
		// Host root is not mapped into the sandbox, so the init stage is
		// no one in its user namespace and exec would leave it without
		// capabilities there; it keeps the few it needs to set the
		// sandbox up as ambient ones, and drops them all before the agent.
		AmbientCaps: []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_SETPCAP},
		Setsid:      true,
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fail(fmt.Errorf("namespaces: %w", err))
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fail(fmt.Errorf("namespaces: %w", err))
	}
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("namespaces: start the init stage: %w", err))
	}
	s.cmd, s.configW, s.reportR = cmd, configW, reportR
	s.agent = protocol.NewClient(sandboxio.PipeConn{ReadCloser: stdout, W: stdin})
	go func() {
		// Read the agent until EOF before Wait closes the pipe under it.
		<-s.agent.Done()
		cmd.Wait()
		logf.Close()
		close(s.exited)
	}()
	return s, nil
}

// configure gives a spawned sandbox its disk, cgroup and limits, sends
// the init stage its config and waits for the agent's hello.
func (s *Sandbox) configure(ctx context.Context, spec airlock.SandboxSpec) error {
	cfg := &s.b.cfg
	if err := s.b.disks.take(ctx, s.dir, spec.Limits.DiskBytes); err != nil {
		return err
	}
	if logPath := filepath.Join(s.dir, "sandbox.log"); os.Rename(s.logPath, logPath) == nil {
		s.logPath = logPath // the log file stays open where it moves
	}
	labels, _ := json.Marshal(spec.Labels)
	os.WriteFile(filepath.Join(s.dir, "labels.json"), labels, 0o600)
	workspace, tmp := filepath.Join(s.dir, "disk", "workspace"), filepath.Join(s.dir, "disk", "tmp")
	if err := os.Chown(workspace, s.uid, s.uid); err != nil {
		return fmt.Errorf("namespaces: %w", err)
	}

	volumes, err := s.mountVolumes(spec, workspace, tmp)
	if err != nil {
		return err
	}

	tasks := spec.Limits.Pids + agentTasks
	s.cgroup = s.b.cgroupPath(s.id)

	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/workspace",
		"LANG=C.UTF-8",
		"USER=sandbox",
		"TMPDIR=/tmp",
	}
	initCfg := nsinit.Config{
		Rootfs:    spec.Image.Rootfs,
		Workspace: workspace,
		Tmp:       tmp,
		Agent:     cfg.AgentPath,
		Env:       append(env, spec.Image.Env...),
		Cwd:       "/workspace",
		Hostname:  "sandbox",
		UID:       SandboxUID,
		GID:       SandboxUID,
		Rlimits: []nsinit.Rlimit{
			{Resource: unix.RLIMIT_NPROC, Cur: uint64(tasks), Max: uint64(tasks)},
			{Resource: unix.RLIMIT_NOFILE, Cur: maxOpenFiles, Max: maxOpenFiles},
			{Resource: unix.RLIMIT_CORE},
		},
		CgroupTasks: s.b.cgroups.ThreadFiles(s.cgroup),
		Volumes:     volumes,
	}
	if err := initCfg.Validate(); err != nil {
		return err
	}
	initJSON, err := initCfg.Encode()
	if err != nil {
		return err
	}
	// The init stage makes its mounts while the host makes its cgroup;
	// the config pipe's close says the cgroup is ready. On cgroup v1 the
	// init stage then moves itself into it (initCfg.CgroupTasks); on v2
	// the host has moved it before. (Moving a whole process takes a global
	// lock that, after a quiet spell, waits for an RCU grace period:
	// milliseconds.)
	if _, err := s.configW.Write(initJSON); err != nil {
		s.configW.Close()
		return fmt.Errorf("namespaces: send the init config: %w (log: %s)", err, s.logTail())
	}
	err = s.b.cgroups.Create(s.cgroup, cgroups.Limits{
		MemoryBytes: spec.Limits.MemoryBytes,
		CPUs:        spec.Limits.CPUs,
		Pids:        tasks,
	})
	if err == nil && len(initCfg.CgroupTasks) == 0 {
		err = s.b.cgroups.Add(s.cgroup, s.cmd.Process.Pid)
	}
	s.configW.Close()
	if err != nil {
		return fmt.Errorf("namespaces: sandbox %s: cgroup: %w", s.id, err)
	}

	deadline := time.Now().Add(cfg.StartTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	rep, err := readReport(s.reportR, deadline)
	s.reportR.Close()
	if err != nil {
		return fmt.Errorf("namespaces: sandbox %s: init stage: %w (log: %s)", s.id, err, s.logTail())
	}
	s.landlock = rep.LandlockABI
	hctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if _, err := s.agent.WaitHello(hctx); err != nil {
		return fmt.Errorf("namespaces: sandbox %s did not start: %w (log: %s)", s.id, err, s.logTail())
	}
	return nil
}

// readReport reads what the init stage reports until it execs the agent
// (which closes the pipe) and returns its last report, or its failure.
func readReport(r *os.File, deadline time.Time) (nsinit.Report, error) {
	r.SetReadDeadline(deadline)
	dec := json.NewDecoder(io.LimitReader(r, 64<<10))
	var last nsinit.Report
	got := false
	for {
		var rep nsinit.Report
		err := dec.Decode(&rep)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return last, err
		}
		if rep.Error != "" {
			return rep, fmt.Errorf("%s: %s", rep.Stage, rep.Error)
		}
		last, got = rep, true
	}
	if !got {
		return last, fmt.Errorf("it exited without a report")
	}
	return last, nil
}

// logTail returns the end of the sandbox's log, for error messages.
func (s *Sandbox) logTail() string { return sandboxio.LogTail(s.logPath) }

// Stats reads the sandbox's cgroup.
func (s *Sandbox) Stats(ctx context.Context) (airlock.Stats, error) {
	st, err := s.b.cgroups.Stats(s.cgroup)
	if err != nil {
		return airlock.Stats{}, err
	}
	return sandboxio.Stats(st), nil
}

// Stop kills every process of the sandbox through its cgroup, which none
// of them can leave, and waits until the cgroup is empty.
func (s *Sandbox) Stop(ctx context.Context) error {
	if s.cmd == nil {
		return nil
	}
	// The first process ends its PID namespace with it (also when it
	// never made it into the cgroup); once it is reaped, every process of
	// the namespace is gone.
	syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL)
	if s.cgroup == "" {
		// Never configured: the first process is all there is. (An empty
		// path would name the root cgroup.)
		select {
		case <-s.exited:
			return nil
		case <-time.After(10 * time.Second):
			return fmt.Errorf("namespaces: sandbox %s did not stop", s.id)
		}
	}
	s.b.cgroups.Kill(s.cgroup)
	select {
	case <-s.exited:
		if s.b.cgroups.Empty(s.cgroup) {
			return nil
		}
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
		return ctx.Err()
	}
	for i := 0; i < 50; i++ {
		s.b.cgroups.Kill(s.cgroup)
		if s.b.cgroups.Empty(s.cgroup) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("namespaces: sandbox %s did not stop", s.id)
}

// Destroy kills the sandbox and removes everything it held on the host.
func (s *Sandbox) Destroy(ctx context.Context) error {
	s.destroyOnce.Do(func() { s.destroyErr = s.destroy(ctx) })
	return s.destroyErr
}

func (s *Sandbox) destroy(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	s.configW.Close() // a no-op when sent: its end tells an unconfigured init stage to give up
	s.reportR.Close()
	if s.cmd != nil {
		if err := s.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
		s.agent.Close()
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
	}
	// The cgroup and the disk go at once. (Empty paths would name the
	// root cgroup and every mount.)
	cgErr := make(chan error, 1)
	go func() {
		if s.cgroup == "" {
			cgErr <- nil
			return
		}
		cgErr <- s.b.cgroups.Remove(s.cgroup)
	}()
	// The volumes' mounts go first: the run directory is removed whole.
	if err := s.unmountVolumes(); err != nil {
		errs = append(errs, err)
	} else if s.dir != "" {
		if err := s.b.disks.discard(s.dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(s.logPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := <-cgErr; err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		s.b.forget(s)
	}
	return errors.Join(errs...)
}

var _ airlock.Killer = (*Sandbox)(nil)

// Kill ends every process of the sandbox (an abuse detector's response);
// the workspace stays until Destroy.
func (s *Sandbox) Kill(ctx context.Context) error { return s.Stop(ctx) }

var _ airlock.CPUWaiter = (*Sandbox)(nil)

// CPUWait is how long the sandbox's threads have waited for a CPU.
func (s *Sandbox) CPUWait(ctx context.Context) time.Duration {
	if s.cgroup == "" {
		return 0
	}
	return s.b.cgroups.CPUWait(s.cgroup)
}
