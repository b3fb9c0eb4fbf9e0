package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/gvisor"
	"github.com/airlockhq/airlock/image"
	"github.com/airlockhq/airlock/namespaces"
	"github.com/airlockhq/airlock/protocol"
)

func init() {
	register("bench-backends", "time create-run-destroy on each backend beside bwrap and the bare process", func(ctx context.Context, args []string) error {
		return runBenchBackends(ctx, args, osStdio())
	})
}

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

Programs: /bin/true, and python3 -c 'print(1)'.

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
                      bwrap and gvisor are left out with a note when missing
  --json              print the results as JSON

Must run as root. The backends get their own state in a temporary
directory and cgroups of their own, removed at the end.
`

// benchRunner runs one program once and returns how long each phase took
// (a runner without phases returns only "total").
type benchRunner struct {
	name string
	once func(ctx context.Context, argv []string) (map[string]time.Duration, error)
	done func()
}

type runnerResult struct {
	Program  string             `json:"program"`
	Runner   string             `json:"runner"`
	Runs     int                `json:"runs"`
	P50      float64            `json:"p50_ms"`
	P99      float64            `json:"p99_ms"`
	Overhead float64            `json:"overhead_p50_ms"`
	Phases   map[string]float64 `json:"phases_p50_ms,omitempty"`
}

func runBenchBackends(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("bench-backends", benchBackendsUsage, std.err)
	stateDir := fs.String("state-dir", stateDirDefault(), "")
	imageName := fs.String("image", "base", "")
	agentPath := fs.String("agent", siblingAgent(), "")
	requests := fs.Int("requests", 100, "")
	warmup := fs.Int("warmup", 5, "")
	runnersFlag := fs.String("runners", "bare,bwrap,namespaces,gvisor", "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err, 2)
	}
	bad := func(format string, a ...any) error { return usageError(std.err, "bench-backends", 2, format, a...) }
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
		r, note, err := newBenchRunner(strings.TrimSpace(name), img, work)
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
	lat := map[string]map[string][]time.Duration{} // program/runner -> phase -> latencies
	key := func(prog []string, r benchRunner) string { return strings.Join(prog, " ") + "\x00" + r.name }
	start := time.Now()
	for i := -*warmup; i < *requests; i++ {
		for _, prog := range programs {
			for _, r := range runners {
				if err := ctx.Err(); err != nil {
					return err
				}
				phases, err := r.once(ctx, prog)
				if err != nil {
					return fmt.Errorf("%s %v: %w", r.name, prog, err)
				}
				if i < 0 {
					continue
				}
				k := key(prog, r)
				if lat[k] == nil {
					lat[k] = map[string][]time.Duration{}
				}
				for ph, d := range phases {
					lat[k][ph] = append(lat[k][ph], d)
				}
			}
		}
	}
	elapsed := time.Since(start)
	var results []runnerResult
	for _, prog := range programs {
		var bare float64
		for _, r := range runners {
			ph := lat[key(prog, r)]
			total := summarize(ph["total"])
			res := runnerResult{Program: strings.Join(prog, " "), Runner: r.name, Runs: total.Count, P50: ms(total.P50), P99: ms(total.P99)}
			if r.name == "bare" {
				bare = res.P50
			}
			for name, ds := range ph {
				if name != "total" {
					if res.Phases == nil {
						res.Phases = map[string]float64{}
					}
					res.Phases[name] = ms(summarize(ds).P50)
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
	if *asJSON {
		enc := json.NewEncoder(std.out)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"image": img.Name, "requests": *requests, "elapsed_s": elapsed.Seconds(), "cpus": runtime.NumCPU(), "results": results})
	}
	fmt.Fprintf(std.out, "create-run-destroy, %d runs each, interleaved, image %s, %d CPUs, %.0fs; milliseconds\n", *requests, img.Name, runtime.NumCPU(), elapsed.Seconds())
	tw := tabwriter.NewWriter(std.out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "program\trunner\tp50\tp99\tover bare p50\tcreate p50\trun p50\tdestroy p50\t")
	for _, r := range results {
		ph := func(n string) string {
			if v, ok := r.Phases[n]; ok {
				return fmt.Sprintf("%.1f", v)
			}
			return "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%+.1f\t%s\t%s\t%s\t\n", r.Program, r.Runner, r.P50, r.P99, r.Overhead, ph("create"), ph("run"), ph("destroy"))
	}
	return tw.Flush()
}

// newBenchRunner makes a runner, or says why it is left out.
func newBenchRunner(name string, img *airlock.Image, work string) (benchRunner, string, error) {
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
	}
	return benchRunner{}, "", fmt.Errorf("unknown runner %q (bare, bwrap, namespaces or gvisor)", name)
}

// backendRunner times Create, Exec to exit, and Destroy on a backend.
func backendRunner(name string, b airlock.Backend, img *airlock.Image, done func()) benchRunner {
	return benchRunner{name: name, done: done, once: func(ctx context.Context, argv []string) (map[string]time.Duration, error) {
		t0 := time.Now()
		sb, err := b.Create(ctx, airlock.SandboxSpec{ID: "bench-" + newID(), Image: img, Limits: airlock.DefaultLimits})
		if err != nil {
			return nil, err
		}
		t1 := time.Now()
		p, err := sb.Agent().Exec(ctx, protocol.ExecRequest{Argv: argv}, nil, nil)
		if err == nil {
			var st protocol.ExitStatus
			if st, err = p.Wait(ctx); err == nil && st.Code != 0 {
				err = fmt.Errorf("exit %d %s", st.Code, st.Error)
			}
		}
		t2 := time.Now()
		if derr := sb.Destroy(ctx); err == nil {
			err = derr
		}
		t3 := time.Now()
		return map[string]time.Duration{"create": t1.Sub(t0), "run": t2.Sub(t1), "destroy": t3.Sub(t2), "total": t3.Sub(t0)}, err
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
