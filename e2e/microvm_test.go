package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/service/image"
	"github.com/airlockhq/airlock/store/sqlite"
)

// TestMicroVMEndToEnd runs airlockd with --microvm for a tenant whose
// operator set its isolation floor to vm: every request, asking for
// nothing, runs in a microVM (all four languages, the chart with its
// artifact, a session with exec, files and a Python context), records
// the backend and its accelerator, and asking for gVisor is refused.
// Then airlockd is killed (SIGKILL) with the session's VM running, and
// the next start leaves nothing of it on the host: no VMM process,
// cgroup, machine directory (chroot, disks) or mount.
func TestMicroVMEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		testreq.Skip(t, "skipped: qemu-system-x86_64 not installed; scripts/setup.sh installs it")
	}
	if _, err := image.FindKernel(filepath.Join(testenv.StateDir(), "kernel")); err != nil {
		testreq.Skipf(t, "skipped: %v", err)
	}
	n := newTestNode(t, nodeOptions{name: "vm-e2e", images: []string{"base", "python-ds"}, parents: []string{"-microvm"}})
	tmp, parent, bin := n.dir, n.parent, n.bin
	vmParent := parent + "-microvm"
	if err := os.Symlink(filepath.Join(testenv.StateDir(), "kernel"), filepath.Join(tmp, "kernel")); err != nil {
		t.Fatal(err)
	}
	args := n.args("--microvm", "--pool-max", "0", "--warm", "", "--warm-sessions", "", "--no-snapshots",
		"--egress-prefix", "vm"+testenv.RandomID()[:4])
	d := n.track(startDaemon(t, bin, args))
	accel := readyzAccel(t, d.url)
	if accel != "kvm" && accel != "tcg" {
		t.Fatalf("/readyz says microvm %q, want kvm or tcg", accel)
	}
	if !strings.Contains(d.logs(), "microvm backend enabled") || !strings.Contains(d.logs(), "accel="+accel) {
		t.Errorf("the log does not say the microvm backend's accelerator:\n%s", d.logs())
	}
	key := n.key()
	withTenant(t, tmp, "default", func(ctx context.Context, db *sqlite.DB, tenantID string) error {
		return db.SetTenantIsolation(ctx, tenantID, airlock.IsolationVM)
	})
	c := newClient(t, d.url, key)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	// Under TCG a boot takes tens of seconds on a loaded machine.
	const timeout = 60
	for _, tt := range []struct {
		req  airlock.ExecuteRequest
		want string
	}{
		{airlock.ExecuteRequest{Language: airlock.Python, Code: "import platform; print(platform.release() != '" + hostRelease(t) + "', 6*7)"}, "True 42\n"},
		{airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo $((6*7)) $(id -u)"}, "42 1000\n"},
		{airlock.ExecuteRequest{Language: airlock.Node, Code: "console.log(6*7)"}, "42\n"},
		{airlock.ExecuteRequest{Language: airlock.SQL, Code: "SELECT 6*7 AS answer;"}, "answer\n------\n42    \n"},
	} {
		tt.req.TimeoutSec = timeout
		e, err := c.Execute(ctx, tt.req)
		if err != nil {
			t.Fatalf("%s: %v", tt.req.Language, err)
		}
		if e.Status != airlock.StatusCompleted || e.ExitCode != 0 || e.Stdout != tt.want || e.Backend != "microvm" || e.Accelerator != accel {
			t.Errorf("%s: %s exit %d stdout %q stderr %q on %q (%q), want %q on microvm (%s)",
				tt.req.Language, e.Status, e.ExitCode, e.Stdout, e.Stderr, e.Backend, e.Accelerator, tt.want, accel)
		}
		if got, err := c.Execution(ctx, e.ID); err != nil || got.Backend != "microvm" || got.Accelerator != accel {
			t.Errorf("%s: the stored record: %+v %v", tt.req.Language, got, err)
		}
	}

	// The chart example, its PNG collected from the guest's disk.
	e, err := c.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Python, Image: "python-ds", Code: chartCode, TimeoutSec: timeout})
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != airlock.StatusCompleted || e.ExitCode != 0 || e.Backend != "microvm" || len(e.Artifacts) != 1 || e.Artifacts[0].Filename != "output.png" {
		t.Fatalf("chart: %s exit %d stderr %q on %s, artifacts %+v", e.Status, e.ExitCode, e.Stderr, e.Backend, e.Artifacts)
	}
	var png bytes.Buffer
	if _, err := c.DownloadArtifact(ctx, e.Artifacts[0], &png); err != nil || !bytes.HasPrefix(png.Bytes(), pngMagic) || int64(png.Len()) != e.Artifacts[0].SizeBytes {
		t.Errorf("chart artifact: %d bytes, %v, PNG %v", png.Len(), err, bytes.HasPrefix(png.Bytes(), pngMagic))
	}

	// Below the floor: refused, nothing run.
	_, err = c.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo no", Isolation: airlock.IsolationKernel})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusForbidden || !strings.HasSuffix(ce.Type, airlock.ProblemIsolationNotAllowed) {
		t.Errorf("isolation kernel for a vm-floor tenant: %v, want 403 %s", err, airlock.ProblemIsolationNotAllowed)
	}

	// A session: exec, files, a Python context.
	sess, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Backend != "microvm" {
		t.Fatalf("the session runs on %q, want microvm", sess.Backend)
	}
	if e, err := c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "echo up > /workspace/up.txt; cat /workspace/up.txt", TimeoutSec: timeout}); err != nil ||
		e.Stdout != "up\n" || e.Backend != "microvm" || e.Accelerator != accel {
		t.Fatalf("session exec: %+v %v", e, err)
	}
	body := "written from the host\n"
	if _, err := c.PutFile(ctx, sess.ID, "/workspace/in.txt", strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	if e, err := c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "tr a-z A-Z < /workspace/in.txt > /workspace/out.txt", TimeoutSec: timeout}); err != nil || e.ExitCode != 0 {
		t.Fatalf("session exec on the file: %+v %v", e, err)
	}
	var got bytes.Buffer
	if _, err := c.GetFile(ctx, sess.ID, "/workspace/out.txt", &got); err != nil || got.String() != strings.ToUpper(body) {
		t.Errorf("get the file: %q %v", got.String(), err)
	}
	cc, err := c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.RunCell(ctx, sess.ID, cc.ID, airlock.RunCellRequest{Code: "x = 6 * 7", TimeoutSec: timeout}); err != nil || r.Error != nil {
		t.Fatalf("cell 1: %+v %v", r, err)
	}
	if r, err := c.RunCell(ctx, sess.ID, cc.ID, airlock.RunCellRequest{Code: "x", TimeoutSec: timeout}); err != nil || r.Value != "42" {
		t.Fatalf("cell 2: %+v %v, want the context to keep x = 42", r, err)
	}

	// SIGKILL with the session's VM running: its VMM outlives airlockd
	// (it is a process of its own) until the next start ends it.
	vmms := cgroupProcs(vmParent)
	if len(vmms) == 0 {
		t.Fatalf("no VMM process in %s with a live session", vmParent)
	}
	d.kill(t)
	if left := cgroupProcs(vmParent); len(left) == 0 {
		t.Fatalf("the VMM died with airlockd; the restart would prove nothing")
	}
	d = n.track(startDaemon(t, bin, args))
	c = newClient(t, d.url, key)
	vms := filepath.Join(tmp, "microvm", "vms")
	waitFor(t, time.Minute, "nothing of the killed airlockd's VMs left", func() bool {
		ents, _ := os.ReadDir(vms)
		return len(cgroupProcs(vmParent)) == 0 && len(cgroupChildren(vmParent)) == 0 && len(ents) == 0 &&
			len(mountsUnder(t, filepath.Join(tmp, "microvm"))) == 0
	})
	for _, pid := range vmms {
		if running(pid) {
			t.Errorf("VMM %d still runs after the restart", pid)
		}
	}
	if s, err := c.Session(ctx, sess.ID); err != nil || s.State.Live() || s.EndReason != airlock.EndServerRestarted {
		t.Errorf("the session after the restart: %+v %v, want ended with %s", s, err, airlock.EndServerRestarted)
	}
	// The node still runs VMs after the restart.
	if e, err := c.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo again", TimeoutSec: timeout}); err != nil || e.Stdout != "again\n" || e.Backend != "microvm" {
		t.Errorf("after the restart: %+v %v", e, err)
	}
	d.stop(t)
	waitFor(t, 30*time.Second, "nothing left after a clean stop", func() bool {
		ents, _ := os.ReadDir(vms)
		return len(cgroupProcs(vmParent)) == 0 && len(cgroupChildren(vmParent)) == 0 && len(ents) == 0
	})
}

// readyzAccel returns the microvm member of /readyz.
func readyzAccel(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		Status  string `json:"status"`
		MicroVM string `json:"microvm"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Status != "ok" {
		t.Fatalf("/readyz: %+v %v", h, err)
	}
	return h.MicroVM
}

func hostRelease(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		testreq.Skipf(t, "skipped: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// cgroupProcs lists the processes in the cgroups below parent.
func cgroupProcs(parent string) []int {
	var out []int
	for _, d := range cgroupDirs(parent) {
		filepath.WalkDir(d, func(p string, de os.DirEntry, err error) error {
			if err != nil || !de.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	return out
}

// running reports whether pid is a process that has not exited (a
// zombie, exited and not yet reaped by init, has).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}
