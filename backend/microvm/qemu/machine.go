package qemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/airlockhq/airlock/backend/microvm/jailer"
	"github.com/airlockhq/airlock/backend/microvm/vmm"
)

// Machine is one jailed QEMU process.
type Machine struct {
	dir    string
	pid    int
	done   chan struct{}
	qmp    *qmp
	agent  net.Conn // dialled while restoring
	reseed net.Conn // the reseed port's socket, if the machine has one

	stopOnce sync.Once
	reseedMu sync.Mutex
}

var _ vmm.Machine = (*Machine)(nil)

// Start links the machine's files into its directory, starts QEMU in its
// jail and connects to its monitor.
func (d *Driver) Start(ctx context.Context, cfg vmm.MachineConfig) (vmm.Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	run, err := prepareJail(&cfg)
	if err != nil {
		return nil, err
	}
	jc := d.jailConfig(&cfg)
	cmd, w, err := jailer.Command(d.cfg.Jailer)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = cfg.Console, cfg.Console
	tapFD, incomingFD := extraFDs(&cfg)
	if cfg.Net != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, cfg.Net.Tap)
		jc.KeepFDs = append(jc.KeepFDs, tapFD)
	}
	if cfg.Incoming != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, cfg.Incoming)
		jc.KeepFDs = append(jc.KeepFDs, incomingFD)
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		cmd.ExtraFiles[0].Close()
		return nil, fmt.Errorf("qemu: start the jailer: %w", err)
	}
	cmd.ExtraFiles[0].Close()
	m := &Machine{dir: cfg.Jail.Dir, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(m.done)
	}()
	fail := func(err error) (vmm.Machine, error) {
		w.Close()
		m.Kill()
		return nil, err
	}
	if cfg.Jail.AddToCgroup != nil {
		if err := cfg.Jail.AddToCgroup(m.pid); err != nil {
			return fail(fmt.Errorf("qemu: cgroup: %w", err))
		}
	}
	if err := jailer.Send(w, jc); err != nil {
		return fail(fmt.Errorf("qemu: jailer config: %w", err))
	}
	if err := d.connect(ctx, m, &cfg, run, incomingFD); err != nil {
		return fail(err)
	}
	return m, nil
}

// prepareJail lays out the machine's jail directory: the kernel, the
// initrd and the drives linked in (writable drives owned by the jail's
// user) and the run directory for its sockets, which it returns.
func prepareJail(cfg *vmm.MachineConfig) (string, error) {
	dir := cfg.Jail.Dir
	if err := os.MkdirAll(filepath.Join(dir, jailDisks[1:]), 0o755); err != nil {
		return "", fmt.Errorf("qemu: %w", err)
	}
	if err := linkIn(cfg.Kernel, filepath.Join(dir, jailKernel[1:])); err != nil {
		return "", err
	}
	if err := linkIn(cfg.Initrd, filepath.Join(dir, jailInitrd[1:])); err != nil {
		return "", err
	}
	for _, dr := range cfg.Drives {
		if err := linkIn(dr.Path, filepath.Join(dir, jailDisks[1:], dr.ID)); err != nil {
			return "", err
		}
		if !dr.ReadOnly {
			if err := os.Chown(dr.Path, cfg.Jail.UID, cfg.Jail.GID); err != nil {
				return "", fmt.Errorf("qemu: %w", err)
			}
		}
	}
	run := filepath.Join(dir, jailRun[1:])
	if err := os.Mkdir(run, 0o700); err != nil {
		return "", fmt.Errorf("qemu: %w", err)
	}
	if err := os.Chown(run, cfg.Jail.UID, cfg.Jail.GID); err != nil {
		return "", fmt.Errorf("qemu: %w", err)
	}
	return run, nil
}

// jailConfig is what the jailer makes of the jail directory before it
// execs QEMU: the host's /usr and the few devices QEMU needs (and
// /dev/kvm under KVM), as the jail's user.
func (d *Driver) jailConfig(cfg *vmm.MachineConfig) jailer.Config {
	jc := jailer.Config{
		Root:     cfg.Jail.Dir,
		UID:      cfg.Jail.UID,
		GID:      cfg.Jail.GID,
		Hostname: "vmm-" + cfg.ID,
		Binds: []jailer.Bind{
			{Source: "/usr", Target: "/usr", ReadOnly: true},
			{Source: "/dev/null", Target: "/dev/null"},
			{Source: "/dev/urandom", Target: "/dev/urandom", ReadOnly: true},
		},
		Symlinks: [][2]string{{"usr/lib", "/lib"}, {"usr/lib64", "/lib64"}, {"usr/bin", "/bin"}},
		Exec:     d.cfg.QEMU,
		Args:     d.args(cfg),
	}
	if d.accel == vmm.AccelKVM {
		jc.Binds = append(jc.Binds, jailer.Bind{Source: "/dev/kvm", Target: "/dev/kvm"})
	}
	return jc
}

// connect waits, within the start timeout, for QEMU's monitor socket in
// run and connects to it, then to the reseed port's socket; for a
// machine restored from a snapshot it brings the state in.
func (d *Driver) connect(ctx context.Context, m *Machine, cfg *vmm.MachineConfig, run string, incomingFD int) error {
	sctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	sock := filepath.Join(run, qmpSock)
	for {
		if _, err := os.Stat(sock); err == nil {
			q, err := dialQMP(sctx, sock)
			if err == nil {
				m.qmp = q
				if cfg.ReseedPort != "" {
					// Connected for the machine's life: the guest's
					// reseeder never sees its port without a host.
					var dialer net.Dialer
					if m.reseed, err = dialer.DialContext(sctx, "unix", filepath.Join(run, reseedSock)); err != nil {
						return fmt.Errorf("qemu: reseed port: %w", err)
					}
				}
				if cfg.Incoming != nil {
					return m.restore(sctx, incomingFD)
				}
				return nil
			}
			if sctx.Err() != nil {
				return fmt.Errorf("qemu: monitor: %w", err)
			}
		}
		select {
		case <-m.done:
			return errors.New("qemu: the VMM exited while starting")
		case <-sctx.Done():
			return fmt.Errorf("qemu: no monitor after %v: %w", d.cfg.StartTimeout, sctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// linkIn hard-links src to dst (the image store and the machine's
// directory share a file system as a rule), or copies it.
func linkIn(src, dst string) error {
	if filepath.Dir(src) == filepath.Dir(dst) && filepath.Base(src) == filepath.Base(dst) {
		return nil
	}
	if err := os.Link(src, dst); err == nil {
		return nil
	} else if !errors.Is(err, syscall.EXDEV) {
		return fmt.Errorf("qemu: link %s: %w", src, err)
	}
	return copyFile(src, dst)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = out.ReadFrom(in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// PID of the QEMU process (the jailer execs it).
func (m *Machine) PID() int { return m.pid }

// AgentSocket is the host path of the agent port's socket.
func (m *Machine) AgentSocket() string { return filepath.Join(m.dir, jailRun[1:], agentSock) }

// Done is closed when QEMU has exited.
func (m *Machine) Done() <-chan struct{} { return m.done }

// Pause stops the vCPUs.
func (m *Machine) Pause(ctx context.Context) error { return m.qmp.Execute(ctx, "stop", nil, nil) }

// Resume lets the vCPUs run.
func (m *Machine) Resume(ctx context.Context) error { return m.qmp.Execute(ctx, "cont", nil, nil) }

// Shutdown asks QEMU to quit and waits; after 5 s it kills it.
func (m *Machine) Shutdown(ctx context.Context) error {
	select {
	case <-m.done:
		return m.closeQMP()
	default:
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if m.qmp != nil {
		m.qmp.Execute(qctx, "quit", nil, nil) // the answer may not come: it quits
	}
	select {
	case <-m.done:
		return m.closeQMP()
	case <-qctx.Done():
		return m.Kill()
	}
}

// Kill sends SIGKILL and waits for QEMU to be gone.
func (m *Machine) Kill() error {
	syscall.Kill(m.pid, syscall.SIGKILL)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("qemu: pid %d did not exit after SIGKILL", m.pid)
	}
	return m.closeQMP()
}

func (m *Machine) closeQMP() error {
	m.stopOnce.Do(func() {
		if m.qmp != nil {
			m.qmp.Close()
		}
		if m.reseed != nil {
			m.reseed.Close()
		}
		if m.agent != nil {
			m.agent.Close()
		}
	})
	return nil
}
