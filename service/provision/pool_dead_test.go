package provision_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/provision"
)

// TestDeadMemberNeverHandedOut kills the runsc processes of an idle pool
// member (as the OOM killer or an operator would) and then asks for a
// sandbox: the request gets a working one, and the dead member is
// destroyed, leaving no directory, cgroup, mount or process behind.
func TestDeadMemberNeverHandedOut(t *testing.T) {
	st := teststack.New(t, teststack.Options{Pool: provision.PoolConfig{Min: 1, Max: 1}, Warm: []string{"base/bash"}, NoServer: true,
		Admission: provision.Admission{OneShotTenantShare: 1}})
	tenant := st.NewTenant(t, "t"+airlock.NewID()[:8])
	h := &harness{m: st.Manager, prov: st.Provisioner, store: st.Store, tenant: tenant.Tenant}
	var ids []string
	testreq.Eventually(t, 2*time.Minute, "a pool member", func() bool {
		ids = h.prov.PoolMemberIDs()
		return len(ids) == 1
	})
	dead := ids[0]
	pids := processesOf(dead)
	if len(pids) < 2 {
		t.Fatalf("the member %s's runsc processes: %v, want the sandbox and its gofer", dead, pids)
	}
	for _, pid := range pids {
		// A short-lived runsc command naming the member (one airlockd
		// ran while readying it) may have ended since the listing.
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			t.Fatalf("kill %d: %v", pid, err)
		}
	}
	testreq.Eventually(t, 30*time.Second, "the killed processes to end", func() bool {
		for _, pid := range pids {
			if running(pid) {
				return false
			}
		}
		return true
	})

	e := h.run(t, airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo ok"})
	if e.Status != airlock.StatusCompleted || e.Stdout != "ok\n" {
		t.Fatalf("after an idle member died: status %s, stdout %q, stderr %q, error %q", e.Status, e.Stdout, e.Stderr, e.Error)
	}

	cfg := st.Backend.Config()
	testreq.Eventually(t, 30*time.Second, "the dead member destroyed", func() bool {
		return leftOf(dead, cfg.StateDir, cfg.CgroupParent) == ""
	})
	if n := counter(t, st, "airlock_pool_dead_total"); n != 1 {
		t.Errorf("airlock_pool_dead_total = %v, want 1", n)
	}
}

// processesOf lists the processes whose command line names sandbox id
// (runsc's sandbox and gofer of that container).
func processesOf(id string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.HasPrefix(string(cmd), "runsc-") && strings.Contains(string(cmd)+"\x00", "\x00"+id+"\x00") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// leftOf names what sandbox id still holds on the host: its directory,
// a cgroup, a mount or a process; "" when nothing.
func leftOf(id, stateDir, cgroupParent string) string {
	if _, err := os.Stat(filepath.Join(stateDir, "sandboxes", id)); err == nil {
		return "its directory"
	}
	cgs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", cgroupParent, id))
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", cgroupParent, id)); err == nil {
		cgs = append(cgs, "v2")
	}
	if len(cgs) > 0 {
		return "a cgroup"
	}
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if strings.Contains(sc.Text(), id) {
				return "a mount"
			}
		}
	}
	if len(processesOf(id)) > 0 {
		return "a process"
	}
	return ""
}

// counter sums a counter of the stack's registry over its labels.
func counter(t *testing.T, st *teststack.Stack, name string) float64 {
	t.Helper()
	mfs, err := st.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
		}
	}
	return v
}
