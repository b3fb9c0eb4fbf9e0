package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/backend/gvisor"
	"github.com/airlockhq/airlock/service/image"
)

const baselineUsage = `usage: airlock baseline --kind runsc|chroot [flags]

Runs code N times outside Airlock, one after another or with several
workers at once, and prints the same latency summary as "airlock bench":
the baselines of BENCHMARKS.md.

  --kind runsc   a bare "runsc run" (systrap, no network) of the image's
                 rootfs per run: gVisor's own cost, without Airlock's
  --kind chroot  "chroot ROOTFS" in a private mount namespace with a tmpfs
                 /tmp: the floor (no isolation at all)

flags:
  --state-dir DIR      where the images are (default $AIRLOCK_STATE_DIR,
                       else /var/lib/airlock)
  --image NAME         image (default python-ds)
  -l, --language LANG  python, bash or node (default python)
  --code CODE          code to run (default: print a one-liner)
  --file FILE          read the code from FILE instead
  --requests N         runs (default 20, at most 10000)
  --warmup N           runs first, not counted (default 2)
  --concurrency N      workers running back to back (default 1, at most 64)
  --cgroup-parent P    put each runsc sandbox in the cgroup P/<id> (as
                       airlockd does), so its CPU can be counted there
  --duration D         with --concurrency: run for D (e.g. 60s) instead of
                       --requests runs, and report the throughput
  -o, --output FORMAT  table (default) or json (--json: deprecated)

Must run as root.
`

func runBaseline(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("baseline", baselineUsage, std.err)
	var kind, stateDir, imageName, lang, code, file string
	var requests, warmup, concurrency int
	var cgroupParent string
	var duration time.Duration
	var codeSet bool
	var out outputFlags
	fs.StringVar(&kind, "kind", "", "")
	fs.StringVar(&stateDir, "state-dir", stateDirDefault(), "")
	fs.StringVar(&imageName, "image", "python-ds", "")
	fs.StringVar(&lang, "l", "python", "")
	fs.StringVar(&lang, "language", "python", "")
	fs.Func("code", "", func(s string) error { code, codeSet = s, true; return nil })
	fs.StringVar(&file, "file", "", "")
	fs.IntVar(&requests, "requests", 20, "")
	fs.IntVar(&warmup, "warmup", 2, "")
	fs.IntVar(&concurrency, "concurrency", 1, "")
	fs.StringVar(&cgroupParent, "cgroup-parent", "", "")
	fs.DurationVar(&duration, "duration", 0, "")
	out.register(fs, true)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	bad := func(format string, a ...any) error { return usageError(std.err, "baseline", format, a...) }
	switch {
	case len(pos) > 0:
		return bad("unexpected argument %q", pos[0])
	case kind != "runsc" && kind != "chroot":
		return bad("--kind must be runsc or chroot")
	case requests < 1 || requests > 10000:
		return bad("--requests must be between 1 and 10000")
	case warmup < 0 || warmup > 1000:
		return bad("--warmup must be between 0 and 1000")
	case concurrency < 1 || concurrency > 64:
		return bad("--concurrency must be between 1 and 64")
	case duration < 0 || duration > time.Hour:
		return bad("--duration must be between 0 and 1h")
	}
	argv, err := interpreterArgv(airlock.Language(lang))
	if err != nil {
		return bad("%v", err)
	}
	if file != "" {
		if code, err = readCode(file, std.in); err != nil {
			return err
		}
	} else if !codeSet {
		code = defaultBenchCode[airlock.Language(lang)]
	}
	argv = append(argv, code)
	st, err := image.NewStore(image.StoreConfig{StateDir: stateDir})
	if err != nil {
		return err
	}
	img, err := st.Resolve(ctx, imageName)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "airlock-baseline-")
	if err != nil {
		return err
	}
	defer removeBaselineWork(work)
	r := &baselineRunner{kind: kind, img: img, argv: argv, work: work, cgroupParent: cgroupParent}
	for i := 0; i < warmup; i++ {
		if _, err := r.once(ctx, -1-i); err != nil {
			return err
		}
	}
	start := time.Now()
	lat, errs, firstEr := runBaselineWorkers(ctx, r, concurrency, requests, duration)
	elapsed := time.Since(start)
	if len(lat) == 0 && firstEr != nil {
		return firstEr
	}
	l := summarize(lat)
	sum := map[string]any{
		"kind": kind, "image": img.Name, "language": lang, "requests": len(lat), "errors": errs, "elapsed_s": elapsed.Seconds(),
		"concurrency": concurrency, "throughput_per_min": float64(len(lat)) / elapsed.Minutes(),
		"latency_ms": benchLatency{Count: l.Count, Min: ms(l.Min), P50: ms(l.P50), P95: ms(l.P95), P99: ms(l.P99), Max: ms(l.Max)},
	}
	if out.json(std) {
		enc := json.NewEncoder(std.out)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	fmt.Fprintf(std.out, "%s baseline, %s, %d runs (%d errors) in %.1fs, %d at once: %.0f/min\n", kind, img.Name, len(lat), errs, elapsed.Seconds(), concurrency, float64(len(lat))/elapsed.Minutes())
	fmt.Fprintf(std.out, "  latency ms  min %.1f  p50 %.1f  p95 %.1f  p99 %.1f  max %.1f\n", ms(l.Min), ms(l.P50), ms(l.P95), ms(l.P99), ms(l.Max))
	return nil
}

// interpreterArgv is the command that runs code given as its last argument.
func interpreterArgv(lang airlock.Language) ([]string, error) {
	switch lang {
	case airlock.Python:
		return []string{"python3", "-c"}, nil
	case airlock.Bash:
		return []string{"bash", "-c"}, nil
	case airlock.Node:
		return []string{"node", "-e"}, nil
	}
	return nil, fmt.Errorf("baseline supports python, bash and node")
}

// writeBaselineBundle writes a minimal OCI bundle: the image read-only, a
// gVisor-internal tmpfs at /tmp as the working directory, uid 1000.
func writeBaselineBundle(dir string, img *airlock.Image, argv []string, cgroupsPath string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	s := specs.Spec{
		Version: specs.Version,
		Root:    &specs.Root{Path: img.Rootfs, Readonly: true},
		Process: &specs.Process{
			User: specs.User{UID: 1000, GID: 1000},
			Args: argv,
			Env:  append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"}, img.Env...),
			Cwd:  "/tmp",
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs"},
		},
		Linux: &specs.Linux{
			CgroupsPath: cgroupsPath,
			Namespaces:  []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.MountNamespace}, {Type: specs.NetworkNamespace}},
		},
	}
	b, err := json.Marshal(&s)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600)
}

// baselineRunner runs the program once outside Airlock.
type baselineRunner struct {
	kind, work, cgroupParent string
	img                      *airlock.Image
	argv                     []string
}

// once runs the program the i-th time and returns how long it took.
func (r *baselineRunner) once(ctx context.Context, i int) (time.Duration, error) {
	start := time.Now()
	var cmd *exec.Cmd
	switch r.kind {
	case "chroot":
		// A private tmpfs on the image's /tmp keeps the image clean.
		script := `mount -t tmpfs tmpfs "$1/tmp" && exec chroot --userspec=1000:1000 "$1" sh -c 'cd /tmp && exec "$@"' sh "${@:2}"`
		cmd = exec.CommandContext(ctx, "unshare", append([]string{"--mount", "--propagation", "private", "bash", "-c", script, "bash", r.img.Rootfs}, r.argv...)...)
	case "runsc":
		bundle := filepath.Join(r.work, "b"+strconv.Itoa(i))
		cg := ""
		if r.cgroupParent != "" {
			cg = "/" + strings.Trim(r.cgroupParent, "/") + "/baseline-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(i)
		}
		if err := writeBaselineBundle(bundle, r.img, r.argv, cg); err != nil {
			return 0, err
		}
		defer os.RemoveAll(bundle)
		start = time.Now()
		cmd = exec.CommandContext(ctx, "runsc", "--root", filepath.Join(r.work, "runsc"), "--platform", "systrap",
			"--network", "none", "--overlay2", "none", "run", "--bundle", bundle, "baseline-"+strconv.Itoa(os.Getpid())+"-"+strconv.Itoa(i))
	}
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("run %d: %v: %s", i, err, out)
	}
	return d, nil
}

// removeBaselineWork removes the runs' working directory, after runsc's
// pin of its empty network namespace in the runsc root there (or the
// directory stays behind with a mount of the host in it).
func removeBaselineWork(work string) {
	gvisor.UnpinNullNetNS(filepath.Join(work, "runsc"))
	os.RemoveAll(work)
}

// runBaselineWorkers runs the program with concurrency workers back to
// back, requests times in all or, with a duration, until it has passed.
// It returns the latencies of the runs that succeeded, the number that
// failed and the first error.
func runBaselineWorkers(ctx context.Context, r *baselineRunner, concurrency, requests int, duration time.Duration) ([]time.Duration, int, error) {
	var (
		mu      sync.Mutex
		lat     []time.Duration
		errs    int
		firstEr error
		next    atomic.Int64
		wg      sync.WaitGroup
	)
	deadline := time.Now().Add(duration)
	for range concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if duration > 0 && time.Now().After(deadline) || duration == 0 && i >= requests {
					return
				}
				d, err := r.once(ctx, i)
				mu.Lock()
				if err != nil {
					errs++
					if firstEr == nil {
						firstEr = err
					}
				} else {
					lat = append(lat, d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return lat, errs, firstEr
}
