package microvm

import (
	"github.com/airlockhq/airlock/internal/guestabi"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/backend/microvm/vmm"
	"github.com/airlockhq/airlock/internal/cgroups"
	"github.com/airlockhq/airlock/internal/loopdisk"
	"github.com/airlockhq/airlock/internal/sandboxio"
)

// maxLogBytes caps the guest's console and the VMM's messages on the
// host; the rest is discarded.
const maxLogBytes = 256 << 10

// vmmTasks bounds the VMM's host tasks (QEMU's threads: a few per vCPU
// and its I/O workers); the guest's own processes are the guest
// kernel's and never host tasks.
const vmmTasks = 512

// vmmCPUs is the VMM's own CPU on top of the guest's in its host cgroup:
// a vCPU thread never uses more than one CPU, so the guest stays within
// its vCPUs, and QEMU's I/O thread (which moves the agent's stream)
// does not have to take its time from them.
const vmmCPUs = 0.25

// baseCmdline is the guest kernel's command line before the per-VM
// parameters: the console on the serial port (errors and worse: the OOM
// killer's line is an error), no reboot (a panic ends the VM), no
// probing of what a microvm does not have, no IPv6 (the sandbox
// network is IPv4 only, as in the other backends).
const baseCmdline = "console=ttyS0 quiet loglevel=4 panic=-1 reboot=t rdinit=" + guestabi.InitPath +
	" edd=off i8042.noaux i8042.nomux i8042.nopnp i8042.dumbkbd random.trust_cpu=on ipv6.disable=1"

// oomMarker is what the guest kernel prints when its OOM killer ends a
// process.
const oomMarker = "Out of memory: Killed process"

// Sandbox is one microVM.
type Sandbox struct {
	b       *Backend
	id      string
	dir     string // machine directory: StateDir/vms/<id>
	uid     int
	cgroup  string
	machine vmm.Machine
	agent   *protocol.Client
	console *consoleLog
	done    chan struct{}
	// info is what a checkpoint of the machine is of; networked that it
	// has a network device.
	info      checkpointInfo
	networked bool

	stopOnce   sync.Once
	stopErr    error
	mounted    bool
	destroy    sync.Once
	destroyErr error
}

var _ airlock.Sandbox = (*Sandbox)(nil)

// ID of the sandbox.
func (s *Sandbox) ID() string { return s.id }

// Agent is the connection to the agent in the guest.
func (s *Sandbox) Agent() airlock.Agent { return s.agent }

// WorkspaceDir is where the host reads the workspace after Stop (the
// scratch disk mounted read-only); empty before.
func (s *Sandbox) WorkspaceDir() string { return filepath.Join(s.dir, "mnt", "workspace") }

// Done is closed when the VM has exited.
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// HostUID is the host uid the sandbox's VMM runs as.
func (s *Sandbox) HostUID() int { return s.uid }

// VMMPID is the host pid of the sandbox's VMM.
func (s *Sandbox) VMMPID() int { return s.machine.PID() }

// Create boots a microVM for spec and waits for its agent's hello.
func (b *Backend) Create(ctx context.Context, spec airlock.SandboxSpec) (airlock.Sandbox, error) {
	return b.create(ctx, spec, nil)
}

// create boots a microVM, or restores one from a checkpoint (from).
func (b *Backend) create(ctx context.Context, spec airlock.SandboxSpec, from *checkpoint) (airlock.Sandbox, error) {
	if !validID.MatchString(spec.ID) {
		return nil, fmt.Errorf("microvm: invalid sandbox id %q", spec.ID)
	}
	if spec.Image == nil || spec.Image.Rootfs == "" {
		return nil, fmt.Errorf("microvm: sandbox %s has no image", spec.ID)
	}
	if spec.Limits.MemoryBytes < 64<<20 || spec.Limits.DiskBytes <= 0 || spec.Limits.Pids <= 0 {
		return nil, fmt.Errorf("microvm: sandbox %s needs memory (at least 64 MiB), disk and process limits", spec.ID)
	}
	if len(spec.Volumes) > 0 {
		// Capabilities says so; never boot without what was asked for.
		return nil, fmt.Errorf("microvm: sandbox %s asks for volumes, which microVMs do not mount (see docs/volumes.md)", spec.ID)
	}
	g, err := b.guest(ctx, spec.Image)
	if err != nil {
		return nil, err
	}
	s := &Sandbox{b: b, id: spec.ID, dir: filepath.Join(b.cfg.vmsDir(), spec.ID), done: make(chan struct{})}
	b.mu.Lock()
	if _, dup := b.live[spec.ID]; dup {
		b.mu.Unlock()
		return nil, fmt.Errorf("microvm: sandbox %s exists", spec.ID)
	}
	b.live[spec.ID] = s
	b.mu.Unlock()
	uid, ok := b.allocUID(spec.ID)
	if !ok {
		b.forget(s)
		return nil, airlock.Problem(airlock.EUNAVAILABLE, "node-busy", "no free VMM user on this node")
	}
	s.uid = uid
	s.info = infoOf(g, spec.Limits, b.SnapshotVersion())
	if err := s.start(ctx, spec, g, from); err != nil {
		return nil, errors.Join(err, s.Destroy(context.WithoutCancel(ctx)))
	}
	return s, nil
}

// start boots the machine, or restores it from a checkpoint (from).
func (s *Sandbox) start(ctx context.Context, spec airlock.SandboxSpec, g *guestabi.Guest, from *checkpoint) error {
	cfg := &s.b.cfg
	if err := os.Mkdir(s.dir, 0o700); err != nil {
		close(s.done)
		return fmt.Errorf("microvm: %w", err)
	}
	labels, _ := json.Marshal(spec.Labels)
	os.WriteFile(filepath.Join(s.dir, "labels.json"), labels, 0o600)
	c, err := newConsoleLog(filepath.Join(s.dir, "console.log"))
	if err != nil {
		close(s.done)
		return err
	}
	s.console = c
	jail := filepath.Join(s.dir, "jail")
	if err := os.Mkdir(jail, 0o755); err != nil {
		close(s.done)
		return fmt.Errorf("microvm: %w", err)
	}
	scratch := filepath.Join(s.dir, "scratch.ext4")
	if from != nil {
		if err := loopdisk.CopySparse(filepath.Join(from.dir, checkpointDisk), scratch); err != nil {
			close(s.done)
			return err
		}
	} else if err := s.b.templates.Create(ctx, scratch, spec.Limits.DiskBytes); err != nil {
		close(s.done)
		return err
	}
	mem := spec.Limits.MemoryBytes
	s.cgroup = s.b.cgroupPath(s.id)
	if err := s.b.cgroups.Create(s.cgroup, cgroups.Limits{
		MemoryBytes: mem + cfg.MemoryOverhead,
		CPUs:        spec.Limits.CPUs + vmmCPUs,
		Pids:        vmmTasks,
	}); err != nil {
		close(s.done)
		return fmt.Errorf("microvm: sandbox %s: cgroup: %w", s.id, err)
	}
	cmdline := fmt.Sprintf("%s %s=%d", baseCmdline, guestabi.ParamNproc, spec.Limits.Pids)
	var nic *vmm.NetDevice
	if spec.Network != nil {
		gn, err := plugNetwork(spec.Network, s.id)
		if err != nil {
			close(s.done)
			return err
		}
		// QEMU holds the tap from here on; it goes when QEMU does.
		defer gn.tap.Close()
		nic = &vmm.NetDevice{Tap: gn.tap, MAC: gn.mac}
		s.networked = true
		cmdline += " " + gn.cfg.Cmdline()
	}
	vcpus := vcpusOf(spec.Limits)
	mc := vmm.MachineConfig{
		ID:        s.id,
		Kernel:    g.Kernel,
		Initrd:    g.Initrd,
		Cmdline:   cmdline,
		VCPUs:     vcpus,
		MemoryMiB: mem >> 20,
		Drives: []vmm.Drive{
			{ID: "root", Path: g.RootDisk, ReadOnly: true, Serial: guestabi.RootSerial},
			{ID: "scratch", Path: scratch, Serial: guestabi.ScratchSerial},
		},
		AgentPort:  guestabi.Port,
		ReseedPort: guestabi.ReseedPort,
		Console:    s.console,
		Net:        nic,
		Jail: vmm.Jail{UID: s.uid, GID: s.uid, Dir: jail,
			AddToCgroup: func(pid int) error { return s.b.cgroups.Add(s.cgroup, pid) }},
	}
	if from != nil {
		f, err := os.Open(filepath.Join(from.dir, checkpointState))
		if err != nil {
			close(s.done)
			return fmt.Errorf("microvm: restore: %w", err)
		}
		defer f.Close()
		mc.Incoming = f
	}
	m, err := cfg.Driver.Start(ctx, mc)
	if err != nil {
		close(s.done)
		return fmt.Errorf("microvm: sandbox %s: %w (console: %s)", s.id, err, s.console.tail())
	}
	s.machine = m
	go func() {
		<-m.Done()
		close(s.done)
	}()
	hctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	if from != nil {
		if err := s.reconnect(hctx, from); err != nil {
			return fmt.Errorf("microvm: sandbox %s did not restore: %w (console: %s)", s.id, err, s.console.tail())
		}
		return nil
	}
	if err := s.connect(hctx); err != nil {
		return fmt.Errorf("microvm: sandbox %s did not start: %w (console: %s)", s.id, err, s.console.tail())
	}
	return nil
}

// connect dials the agent's port and waits for its hello. The guest's
// writes wait until the host side is connected, so nothing is lost to a
// late connect.
func (s *Sandbox) connect(ctx context.Context) error {
	var d net.Dialer
	var conn net.Conn
	for {
		var err error
		if conn, err = d.DialContext(ctx, "unix", s.machine.AgentSocket()); err == nil {
			break
		}
		select {
		case <-s.done:
			return errors.New("the VM exited")
		case <-ctx.Done():
			return fmt.Errorf("agent port: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	s.useAgent(conn)
	if _, err := s.agent.WaitHello(ctx); err != nil {
		return err
	}
	return nil
}

// useAgent makes conn the connection to the agent, closed when the VM
// exits.
func (s *Sandbox) useAgent(conn net.Conn) {
	s.agent = protocol.NewClient(conn)
	go func() {
		select {
		case <-s.done:
			s.agent.Close()
		case <-s.agent.Done():
		}
	}()
}

// Stats reads the VMM's cgroup; OOMKilled is the guest kernel's OOM
// killer having ended a program (its console line).
func (s *Sandbox) Stats(ctx context.Context) (airlock.Stats, error) {
	st, err := s.b.cgroups.Stats(s.cgroup)
	if err != nil {
		return airlock.Stats{}, err
	}
	out := sandboxio.Stats(st)
	if s.console.oomKilled() {
		out.OOMKilled = true
	}
	return out, nil
}

// Stop ends every program in the guest and the VM itself, then mounts
// the scratch disk read-only on the host for the workspace to be read.
// The agent is asked first to end every program of the sandbox user and
// flush the disk; whatever it does, the VM is then quit.
func (s *Sandbox) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(ctx) })
	return s.stopErr
}

func (s *Sandbox) stop(ctx context.Context) error {
	if s.machine == nil {
		return nil
	}
	select {
	case <-s.done:
	default:
		if s.agent != nil {
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			p, err := s.agent.Exec(fctx, protocol.ExecRequest{Argv: []string{"/bin/sh", "-c", "kill -9 -1; sync"}, TimeoutMS: 10000}, nil, nil)
			if err == nil {
				p.Wait(fctx)
			}
			cancel()
		}
	}
	if err := s.machine.Shutdown(ctx); err != nil {
		return err
	}
	<-s.done
	mnt := filepath.Join(s.dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return fmt.Errorf("microvm: %w", err)
	}
	// The guest wrote this disk as it liked (root in the guest can write
	// it raw): mount it read-only from the first mount, on a read-only
	// loop device, with noload, so the host kernel never replays a
	// journal the guest left or writes anything back.
	if err := loopdisk.MountReadOnly(ctx, mnt, filepath.Join(s.dir, "scratch.ext4")); err != nil {
		return err
	}
	s.mounted = true
	return nil
}

// Destroy ends the VM and removes everything it held on the host.
func (s *Sandbox) Destroy(ctx context.Context) error {
	s.destroy.Do(func() { s.destroyErr = s.doDestroy(context.WithoutCancel(ctx)) })
	return s.destroyErr
}

func (s *Sandbox) doDestroy(ctx context.Context) error {
	var errs []error
	if s.machine != nil {
		if err := s.machine.Kill(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.agent != nil {
		s.agent.Close()
	}
	<-s.done
	if s.console != nil {
		s.console.Close()
	}
	if s.cgroup != "" {
		if err := s.b.cgroups.Remove(s.cgroup); err != nil {
			errs = append(errs, err)
		}
	}
	if err := loopdisk.UnmountAll(s.dir); err != nil {
		errs = append(errs, err)
	} else if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		s.b.forget(s)
	}
	return errors.Join(errs...)
}

// consoleLog keeps the first maxLogBytes of the guest's console in a
// file, and whether the OOM killer's line went by.
type consoleLog struct {
	mu   sync.Mutex
	f    *os.File
	n    int64
	oom  bool
	last []byte // the end of the previous write, for a marker split across writes
	path string
}

func newConsoleLog(path string) (*consoleLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("microvm: %w", err)
	}
	return &consoleLog{f: f, path: path}, nil
}

func (c *consoleLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	joined := append(c.last, p...)
	if strings.Contains(string(joined), oomMarker) {
		c.oom = true
	}
	if len(joined) > len(oomMarker) {
		joined = joined[len(joined)-len(oomMarker):]
	}
	c.last = append([]byte(nil), joined...)
	if room := maxLogBytes - c.n; room > 0 {
		k := min(int64(len(p)), room)
		c.f.Write(p[:k])
		c.n += k
	}
	return len(p), nil
}

// oomKilled reports whether the guest kernel's OOM killer has ended a
// program.
func (c *consoleLog) oomKilled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.oom
}

func (c *consoleLog) tail() string { return sandboxio.LogTail(c.path) }

func (c *consoleLog) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.f.Close()
}
