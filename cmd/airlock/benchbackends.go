package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/backend/gvisor"
	"github.com/airlockhq/airlock/backend/microvm"
	"github.com/airlockhq/airlock/backend/microvm/qemu"
	"github.com/airlockhq/airlock/backend/namespaces"
	"github.com/airlockhq/airlock/service/image"
)

const benchBackendsUsage = `usage: airlock bench-backends [flags]

Creates a sandbox, runs one program in it and destroys it, N times one
after another, for each program and each runner, interleaved round-robin
in one run so that all see the same machine. It prints each runner's
latency (p50, p99; nearest rank) and its overhead over the bare process
at p50; for the backends also the p50 of each phase. The runners:

  bare        the program itself, chrooted into the image's rootfs as
              uid 1000 (no isolation: the floor)
  bwrap       bubblewrap running it in the same rootfs read-only, with a
              new /dev, /proc and /tmp and every namespace unshared
  namespaces  the namespaces backend: Create, Exec, Wait, Destroy
  gvisor      the gVisor backend, booting each sandbox cold
  microvm     the microVM backend (QEMU microvm, KVM when its probe boot
              works, else TCG; the table names which), booting each VM
              cold: create is the cold boot to the agent's hello

Programs: /bin/true, and python3 -c 'print(1)'. For the backends a
second table gives their memory: the sandbox's host cgroup right after
create (idle), and for a microVM also QEMU's resident memory then and
the guest's own use (MemTotal - MemAvailable) after the program ran.
For a backend that snapshots (gvisor, microvm), "restore" is a restore
of one checkpoint of a booted sandbox to its agent's answer, once per
run beside the cold create (not part of the total).

flags:
  --state-dir DIR     where the images are (default $AIRLOCK_STATE_DIR,
                      else /var/lib/airlock)
  --image NAME        image (default base)
  --agent PATH        the agent binary the image must carry (default: the
                      airlock-agent next to this program, if there is one;
                      else the newest image of the name)
  --requests N        runs per program and runner (default 100, at most 10000)
  --warmup N          runs first, not counted (default 5)
  --runners LIST      comma-separated (default bare,bwrap,namespaces,gvisor);
                      bwrap, gvisor and microvm are left out with a note
                      when missing
  -o, --output FORMAT table (default) or json (--json: deprecated)

Must run as root. The backends get their own state in a temporary
directory and cgroups of their own, removed at the end.
`

// benchRunner runs one program once and returns how long each phase took
// (a runner without phases returns only "total").
type benchRunner struct {
	name string
	once func(ctx context.Context, argv []string) (map[string]time.Duration, error)
	done func()
	// mem, when set, holds the runner's memory figures of each run, by
	// name (bytes).
	mem map[string][]int64
}

type runnerResult struct {
	Program   string             `json:"program"`
	Runner    string             `json:"runner"`
	Runs      int                `json:"runs"`
	P50       float64            `json:"p50_ms"`
	P99       float64            `json:"p99_ms"`
	Overhead  float64            `json:"overhead_p50_ms"`
	Phases    map[string]float64 `json:"phases_p50_ms,omitempty"`
	PhasesP99 map[string]float64 `json:"phases_p99_ms,omitempty"`
	// Memory are the p50 of the runner's memory figures, MiB.
	Memory map[string]float64 `json:"memory_p50_mib,omitempty"`
}

func runBenchBackends(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("bench-backends", benchBackendsUsage, std.err)
	stateDir := fs.String("state-dir", stateDirDefault(), "")
	imageName := fs.String("image", "base", "")
	agentPath := fs.String("agent", siblingAgent(), "")
	requests := fs.Int("requests", 100, "")
	warmup := fs.Int("warmup", 5, "")
	runnersFlag := fs.String("runners", "bare,bwrap,namespaces,gvisor", "")
	var out outputFlags
	out.register(fs, true)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	bad := func(format string, a ...any) error { return usageError(std.err, "bench-backends", format, a...) }
	switch {
	case len(pos) > 0:
		return bad("unexpected argument %q", pos[0])
	case *requests < 1 || *requests > 10000:
		return bad("--requests must be between 1 and 10000")
	case *warmup < 0 || *warmup > 1000:
		return bad("--warmup must be between 0 and 1000")
	}
	if os.Geteuid() != 0 {
		return errors.New("bench-backends must run as root (chroot, namespaces, cgroups, loop mounts)")
	}
	st, err := image.NewStore(image.StoreConfig{StateDir: *stateDir, AgentPath: *agentPath})
	if err != nil {
		return err
	}
	img, err := st.Resolve(ctx, *imageName)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "airlock-bench-backends-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	var runners []benchRunner
	defer func() {
		for _, r := range runners {
			if r.done != nil {
				r.done()
			}
		}
	}()
	for _, name := range strings.Split(*runnersFlag, ",") {
		r, note, err := newBenchRunner(ctx, strings.TrimSpace(name), img, work, *stateDir)
		if err != nil {
			return err
		}
		if note != "" {
			fmt.Fprintf(std.err, "bench-backends: leaving out %s: %s\n", name, note)
			continue
		}
		runners = append(runners, r)
	}
	programs := [][]string{{"/bin/true"}, {"python3", "-c", "print(1)"}}
	start := time.Now()
	lat, err := measureRunners(ctx, runners, programs, *warmup, *requests)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	results := backendResults(runners, programs, lat)
	if out.json(std) {
		enc := json.NewEncoder(std.out)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"image": img.Name, "requests": *requests, "elapsed_s": elapsed.Seconds(), "cpus": runtime.NumCPU(), "results": results})
	}
	fmt.Fprintf(std.out, "create-run-destroy, %d runs each, interleaved, image %s, %d CPUs, %.0fs; milliseconds\n", *requests, img.Name, runtime.NumCPU(), elapsed.Seconds())
	return printBackendResults(std.out, results)
}

// benchKey names a program on a runner in the latency map.
func benchKey(prog []string, r benchRunner) string { return strings.Join(prog, " ") + "\x00" + r.name }

// measureRunners runs every program on every runner, round-robin,
// warmup+requests times, and returns the latencies of the counted runs by
// benchKey and phase.
func measureRunners(ctx context.Context, runners []benchRunner, programs [][]string, warmup, requests int) (map[string]map[string][]time.Duration, error) {
	lat := map[string]map[string][]time.Duration{}
	for i := -warmup; i < requests; i++ {
		for _, prog := range programs {
			for _, r := range runners {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				phases, err := r.once(ctx, prog)
				if err != nil {
					return nil, fmt.Errorf("%s %v: %w", r.name, prog, err)
				}
				if i < 0 {
					continue
				}
				k := benchKey(prog, r)
				if lat[k] == nil {
					lat[k] = map[string][]time.Duration{}
				}
				for ph, d := range phases {
					lat[k][ph] = append(lat[k][ph], d)
				}
			}
		}
	}
	return lat, nil
}

// backendResults summarises the latencies and memory figures of each
// program on each runner, with its overhead over the bare process.
func backendResults(runners []benchRunner, programs [][]string, lat map[string]map[string][]time.Duration) []runnerResult {
	var results []runnerResult
	for _, prog := range programs {
		var bare float64
		for _, r := range runners {
			ph := lat[benchKey(prog, r)]
			total := summarize(ph["total"])
			res := runnerResult{Program: strings.Join(prog, " "), Runner: r.name, Runs: total.Count, P50: ms(total.P50), P99: ms(total.P99)}
			if r.name == "bare" {
				bare = res.P50
			}
			for name, ds := range ph {
				if name != "total" {
					if res.Phases == nil {
						res.Phases, res.PhasesP99 = map[string]float64{}, map[string]float64{}
					}
					res.Phases[name] = ms(summarize(ds).P50)
					res.PhasesP99[name] = ms(summarize(ds).P99)
				}
			}
			for name, vs := range r.mem {
				if strings.HasPrefix(name, strings.Join(prog, " ")+"\x00") && len(vs) > 0 {
					if res.Memory == nil {
						res.Memory = map[string]float64{}
					}
					res.Memory[strings.TrimPrefix(name, strings.Join(prog, " ")+"\x00")] = float64(median(vs)) / (1 << 20)
				}
			}
			results = append(results, res)
		}
		for i := range results {
			if results[i].Program == strings.Join(prog, " ") {
				results[i].Overhead = results[i].P50 - bare
			}
		}
	}
	return results
}

// printBackendResults prints the latency table and, for the runners with
// memory figures, the memory table.
func printBackendResults(w io.Writer, results []runnerResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "program\trunner\tp50\tp99\tover bare p50\tcreate p50\tcreate p99\trestore p50\trun p50\trun p99\tdestroy p50\t")
	for _, r := range results {
		ph := func(m map[string]float64, n string) string {
			if v, ok := m[n]; ok {
				return fmt.Sprintf("%.1f", v)
			}
			return "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%+.1f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Program, r.Runner, r.P50, r.P99, r.Overhead,
			ph(r.Phases, "create"), ph(r.PhasesP99, "create"), ph(r.Phases, "restore"), ph(r.Phases, "run"), ph(r.PhasesP99, "run"), ph(r.Phases, "destroy"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var withMem []runnerResult
	for _, r := range results {
		if len(r.Memory) > 0 {
			withMem = append(withMem, r)
		}
	}
	if len(withMem) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nmemory, MiB, p50: host cgroup and QEMU's RSS right after create (idle); the guest's own use after the program")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "program\trunner\tcgroup idle\tVMM RSS idle\tguest used\t")
	for _, r := range withMem {
		mb := func(n string) string {
			if v, ok := r.Memory[n]; ok {
				return fmt.Sprintf("%.1f", v)
			}
			return "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", r.Program, r.Runner, mb(memCgroup), mb(memVMMRSS), mb(memGuestUsed))
	}
	return tw.Flush()
}

// newBenchRunner makes a runner, or says why it is left out.
func newBenchRunner(ctx context.Context, name string, img *airlock.Image, work, stateDir string) (benchRunner, string, error) {
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	switch name {
	case "bare":
		return benchRunner{name: name, once: func(ctx context.Context, argv []string) (map[string]time.Duration, error) {
			path, err := lookPathIn(img.Rootfs, argv[0])
			if err != nil {
				return nil, err
			}
			cmd := exec.CommandContext(ctx, path, argv[1:]...)
			cmd.Path = path // inside the chroot, not looked up on the host
			cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"}, img.Env...)
			cmd.Dir = "/"
			cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: img.Rootfs, Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
			return timed(cmd)
		}}, "", nil
	case "bwrap":
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			return benchRunner{}, "bwrap is not installed (apt-get install bubblewrap)", nil
		}
		return benchRunner{name: name, once: func(ctx context.Context, argv []string) (map[string]time.Duration, error) {
			args := []string{"--ro-bind", img.Rootfs, "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
				"--unshare-all", "--die-with-parent", "--uid", "1000", "--gid", "1000", "--chdir", "/tmp", "--"}
			cmd := exec.CommandContext(ctx, bwrap, append(args, argv...)...)
			cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"}, img.Env...)
			return timed(cmd)
		}}, "", nil
	case "namespaces":
		b, err := namespaces.New(namespaces.Config{StateDir: filepath.Join(work, "namespaces"), CgroupParent: "airlock-bench-ns-" + newID(), Logger: quiet})
		if err != nil {
			return benchRunner{}, "", err
		}
		return backendRunner(name, b, img, func() {
			b.Close()
			b.Reconcile(context.Background())
			b.RemoveAll()
		}), "", nil
	case "gvisor":
		if _, err := exec.LookPath("runsc"); err != nil {
			return benchRunner{}, "runsc is not installed", nil
		}
		b, err := gvisor.New(gvisor.Config{StateDir: filepath.Join(work, "gvisor"), CgroupParent: "airlock-bench-gv-" + newID(), Logger: quiet})
		if err != nil {
			return benchRunner{}, "", err
		}
		return backendRunner(name, b, img, func() {
			b.Reconcile(context.Background())
			b.RemoveAll()
		}), "", nil
	case "microvm":
		if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
			return benchRunner{}, "qemu-system-x86_64 is not installed", nil
		}
		kdir, err := image.FindKernel(filepath.Join(stateDir, "kernel"))
		if err != nil {
			return benchRunner{}, err.Error(), nil
		}
		kernel, err := image.KernelImage(kdir)
		if err != nil {
			return benchRunner{}, "", err
		}
		drv, err := qemu.New(ctx, qemu.Config{ProbeKernel: kernel, Logger: quiet})
		if err != nil {
			return benchRunner{}, "", err
		}
		var r [2]byte
		rand.Read(r[:])
		b, err := microvm.New(microvm.Config{
			StateDir: filepath.Join(work, "microvm"), Driver: drv,
			BuildGuest:   image.GuestBuilder(image.GuestConfig{StateDir: stateDir, KernelDir: kdir}),
			CgroupParent: "airlock-bench-vm-" + newID(),
			// A block of host uids of its own, apart from a node's.
			UIDBase: microvm.DefaultUIDBase + (int(r[0])<<8|int(r[1]))%4096*4096, UIDCount: 4096,
			Logger: quiet,
		})
		if err != nil {
			return benchRunner{}, "", err
		}
		return backendRunner("microvm/"+string(drv.Accel()), b, img, func() {
			b.Reconcile(context.Background())
			b.RemoveAll()
		}), "", nil
	}
	return benchRunner{}, "", fmt.Errorf("unknown runner %q (bare, bwrap, namespaces, gvisor or microvm)", name)
}

// Memory figures of a backend runner.
const (
	memCgroup    = "cgroup"     // the sandbox's host cgroup right after create
	memVMMRSS    = "vmm_rss"    // a microVM's QEMU resident memory then
	memGuestUsed = "guest_used" // a microVM guest's MemTotal - MemAvailable after the run
)

// vmmRSS is the resident memory of a sandbox's VMM process, if it has one.
func vmmRSS(sb airlock.Sandbox) (int64, bool) {
	v, ok := sb.(interface{ VMMPID() int })
	if !ok {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", v.VMMPID()))
	if err != nil {
		return 0, false
	}
	return meminfoField(string(b), "VmRSS")
}

// meminfoField reads "Name: N kB" from /proc/meminfo or /proc/PID/status
// text, in bytes.
func meminfoField(text, name string) (int64, bool) {
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		return n << 10, err == nil && n >= 0
	}
	return 0, false
}

// guestUsed is the guest's MemTotal - MemAvailable, read in the guest.
func guestUsed(ctx context.Context, sb airlock.Sandbox) (int64, bool) {
	var out strings.Builder
	p, err := sb.Agent().Exec(ctx, protocol.ExecRequest{Argv: []string{"cat", "/proc/meminfo"}}, &out, io.Discard)
	if err != nil {
		return 0, false
	}
	if st, err := p.Wait(ctx); err != nil || st.Code != 0 {
		return 0, false
	}
	total, ok1 := meminfoField(out.String(), "MemTotal")
	avail, ok2 := meminfoField(out.String(), "MemAvailable")
	return total - avail, ok1 && ok2 && total >= avail
}

func median(vs []int64) int64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// backendRunner times Create, Exec to exit, and Destroy on a backend.
func backendRunner(name string, b airlock.Backend, img *airlock.Image, done func()) benchRunner {
	mem := map[string][]int64{}
	note := func(argv []string, what string, v int64) {
		k := strings.Join(argv, " ") + "\x00" + what
		mem[k] = append(mem[k], v)
	}
	snap, canSnap := b.(airlock.Snapshotter)
	ckpt := ""
	cleanup := func() {
		if ckpt != "" {
			os.RemoveAll(ckpt)
		}
		if done != nil {
			done()
		}
	}
	return benchRunner{name: name, done: cleanup, mem: mem, once: func(ctx context.Context, argv []string) (map[string]time.Duration, error) {
		var restore time.Duration
		if canSnap {
			if ckpt == "" {
				// One checkpoint of a booted sandbox, restored once per run.
				dir, err := os.MkdirTemp("", "airlock-bench-ckpt-")
				if err != nil {
					return nil, err
				}
				os.Remove(dir)
				sb, err := b.Create(ctx, airlock.SandboxSpec{ID: "bench-" + newID(), Image: img, Limits: airlock.DefaultLimits})
				if err != nil {
					return nil, err
				}
				if err := snap.Checkpoint(ctx, sb, dir); err != nil {
					return nil, fmt.Errorf("checkpoint: %w", err)
				}
				ckpt = dir
			}
			t0 := time.Now()
			r, err := snap.Restore(ctx, airlock.SandboxSpec{ID: "bench-" + newID(), Image: img, Limits: airlock.DefaultLimits}, ckpt)
			if err != nil {
				return nil, fmt.Errorf("restore: %w", err)
			}
			restore = time.Since(t0)
			if err := r.Destroy(ctx); err != nil {
				return nil, err
			}
		}
		t0 := time.Now()
		sb, err := b.Create(ctx, airlock.SandboxSpec{ID: "bench-" + newID(), Image: img, Limits: airlock.DefaultLimits})
		if err != nil {
			return nil, err
		}
		create := time.Since(t0)
		if st, err := sb.Stats(ctx); err == nil {
			note(argv, memCgroup, st.MemoryBytes)
		}
		rss, isVM := vmmRSS(sb)
		if isVM {
			note(argv, memVMMRSS, rss)
		}
		t1 := time.Now() // the readings are not the run's
		p, err := sb.Agent().Exec(ctx, protocol.ExecRequest{Argv: argv}, nil, nil)
		if err == nil {
			var st protocol.ExitStatus
			if st, err = p.Wait(ctx); err == nil && st.Code != 0 {
				err = fmt.Errorf("exit %d %s", st.Code, st.Error)
			}
		}
		t2 := time.Now()
		if isVM && err == nil {
			if used, ok := guestUsed(ctx, sb); ok {
				note(argv, memGuestUsed, used)
			}
		}
		t2a := time.Now()
		if derr := sb.Destroy(ctx); err == nil {
			err = derr
		}
		t3 := time.Now()
		out := map[string]time.Duration{"create": create, "run": t2.Sub(t1), "destroy": t3.Sub(t2a), "total": create + t2.Sub(t1) + t3.Sub(t2a)}
		if canSnap {
			out["restore"] = restore
		}
		return out, err
	}}
}

// timed runs cmd to its end and returns how long that took.
func timed(cmd *exec.Cmd) (map[string]time.Duration, error) {
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	return map[string]time.Duration{"total": d}, nil
}

// lookPathIn finds a program in the PATH of a root file system and
// returns its path inside it.
func lookPathIn(rootfs, name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
		if fi, err := os.Stat(filepath.Join(rootfs, dir, name)); err == nil && fi.Mode().IsRegular() {
			return filepath.Join(dir, name), nil
		}
	}
	return "", fmt.Errorf("%s not found in %s", name, rootfs)
}

// siblingAgent is the airlock-agent next to this program, or "".
func siblingAgent() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	p := filepath.Join(filepath.Dir(exe), "airlock-agent")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}
