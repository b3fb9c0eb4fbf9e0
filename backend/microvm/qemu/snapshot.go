package qemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// snapshotFD is the name the saved state's descriptor is given in QEMU
// (getfd).
const snapshotFD = "airlock-state"

// migrationStatus is what query-migrate says.
type migrationStatus struct {
	Status      string `json:"status"`
	ErrorDesc   string `json:"error-desc"`
	TotalTimeMS int64  `json:"total-time"`
}

// Snapshot stops the vCPUs and migrates the machine's state into w: the
// descriptor is handed to QEMU over the monitor's socket (getfd) and the
// migration goes to "fd:" (QEMU 7.2 has no "file:" URI, and "exec:"
// would spawn a shell, which QEMU's seccomp sandbox forbids). The
// machine stays stopped.
func (m *Machine) Snapshot(ctx context.Context, w *os.File) error {
	if err := m.qmp.Execute(ctx, "stop", nil, nil); err != nil {
		return err
	}
	if err := m.qmp.ExecuteWithFD(ctx, "getfd", map[string]any{"fdname": snapshotFD}, int(w.Fd())); err != nil {
		return err
	}
	// A stopped machine's state is written at the disk's pace, not the
	// default bandwidth limit's.
	if err := m.qmp.Execute(ctx, "migrate-set-parameters", map[string]any{"max-bandwidth": int64(1) << 40}, nil); err != nil {
		return err
	}
	if err := m.qmp.Execute(ctx, "migrate", map[string]any{"uri": "fd:" + snapshotFD}, nil); err != nil {
		return err
	}
	return m.waitMigration(ctx, "save")
}

// restore reads the incoming state from QEMU's descriptor fd once the
// host is connected to the agent's port, and waits until the machine
// runs again.
func (m *Machine) restore(ctx context.Context, fd int) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", m.AgentSocket())
	if err != nil {
		return fmt.Errorf("qemu: agent port: %w", err)
	}
	m.agent = conn
	if err := m.qmp.Execute(ctx, "migrate-incoming", map[string]any{"uri": fmt.Sprintf("fd:%d", fd)}, nil); err != nil {
		return err
	}
	if err := m.waitMigration(ctx, "restore"); err != nil {
		return err
	}
	for {
		var st struct {
			Running bool   `json:"running"`
			Status  string `json:"status"`
		}
		if err := m.qmp.Execute(ctx, "query-status", nil, &st); err != nil {
			return err
		}
		if st.Running {
			return nil
		}
		if st.Status != "inmigrate" && st.Status != "postmigrate" && st.Status != "paused" && st.Status != "prelaunch" {
			return fmt.Errorf("qemu: restored machine is %s", st.Status)
		}
		if st.Status == "paused" {
			if err := m.qmp.Execute(ctx, "cont", nil, nil); err != nil {
				return err
			}
		}
		if err := m.pollWait(ctx); err != nil {
			return err
		}
	}
}

// waitMigration polls query-migrate until the migration completed.
func (m *Machine) waitMigration(ctx context.Context, what string) error {
	for {
		var st migrationStatus
		if err := m.qmp.Execute(ctx, "query-migrate", nil, &st); err != nil {
			return err
		}
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("qemu: %s: migration %s: %s", what, st.Status, st.ErrorDesc)
		}
		if err := m.pollWait(ctx); err != nil {
			return fmt.Errorf("qemu: %s: migration %q: %w", what, st.Status, err)
		}
	}
}

func (m *Machine) pollWait(ctx context.Context) error {
	select {
	case <-m.done:
		return errors.New("the VMM exited")
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(20 * time.Millisecond):
		return nil
	}
}

// AgentConn is the connection to the agent's port made while restoring;
// nil for a machine that booted.
func (m *Machine) AgentConn() net.Conn { return m.agent }

// Reseed sends seed on the reseed port and waits for the guest's answer:
// 1 once its kernel has reseeded.
func (m *Machine) Reseed(ctx context.Context, seed []byte) error {
	if m.reseed == nil {
		return errors.New("qemu: the machine has no reseed port")
	}
	m.reseedMu.Lock()
	defer m.reseedMu.Unlock()
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(30 * time.Second)
	}
	m.reseed.SetDeadline(dl)
	defer m.reseed.SetDeadline(time.Time{})
	if _, err := m.reseed.Write(seed); err != nil {
		return fmt.Errorf("qemu: reseed: %w", err)
	}
	var ack [1]byte
	if _, err := io.ReadFull(m.reseed, ack[:]); err != nil {
		return fmt.Errorf("qemu: reseed: %w", err)
	}
	if ack[0] != 1 {
		return errors.New("qemu: the guest could not reseed")
	}
	return nil
}
