package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// Bounds of a bench run, so it always stops by itself.
const (
	maxBenchConcurrency = 256
	maxBenchDuration    = time.Hour
	maxBenchRequests    = 1_000_000
	maxBenchWarmup      = 10_000

	transportBackoff = 50 * time.Millisecond // a worker's pause after a network error
)

const benchUsage = `usage: airlock bench [flags]

Load-tests POST /v1/execute on this machine's own server: N workers send
requests back to back until --duration has passed or --requests have been
sent, whichever comes first (requests in flight then finish); a worker
told to retry later (429 or 503 with Retry-After) waits as told. It prints
requests, errors, throughput and latency (min, p50, p95, p99, max;
nearest-rank, over the requests that returned an execution). It first
checks with one GET /v1/executions?limit=1 that the server answers and
takes the key. A worker pauses 50ms after a network error. Ctrl-C stops
early and still prints the summary. Errors are all requests that were not
ok: non-zero exit, timed out, out of memory, failed by the server, API
errors by HTTP status, and network errors.

flags:
  --url URL            server (default $AIRLOCK_URL, else
                       http://127.0.0.1:8080); its host must be a loopback
                       address or localhost
  --allow-remote       allow a --url whose host is not loopback
  --key KEY            API key (default $AIRLOCK_API_KEY, else the file
                       $AIRLOCK_STATE_DIR/default.key)
  -l, --language LANG  python, bash, node or sql (default python)
  --code CODE          code to run (default: a one-liner printing "ok")
  --file FILE          read the code from FILE instead
  --timeout SEC        timeout_sec of each execution (default: the server's)
  --concurrency N      workers (default 4, at most 256)
  --duration D         how long to send requests, e.g. 30s, 2m (default 30s,
                       at most 1h)
  --requests N         stop after N requests (default: only --duration;
                       at most 1000000)
  --warmup N           requests sent first and not counted (default 0)
  --rate R             start at most R requests per second in all (default:
                       back to back); latency then excludes the wait
  --sessions           measure session creation instead: each request is a
                       POST /v1/sessions (timed until the session is ready)
                       followed, untimed, by its DELETE; --code, --file and
                       --language do not apply
  --image NAME         image of the sessions (default python-ds)
  -o, --output FORMAT  table (default) or json: the summary as JSON on
                       stdout (--json: deprecated, -o json)

exit status: 0 when the run completed (whatever the errors), 1 on a
failure to start, 2 on bad usage.
`

// defaultBenchCode prints "ok" in each language.
var defaultBenchCode = map[airlock.Language]string{
	airlock.Python: `print("ok")`,
	airlock.Bash:   `echo ok`,
	airlock.Node:   `console.log("ok")`,
	airlock.SQL:    `SELECT 'ok';`,
}

// checkLocalURL refuses a server URL whose host is not a loopback IP
// address or "localhost": bench must only load-test its own machine.
func checkLocalURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("URL %q does not parse: %v", raw, err)
	}
	host := u.Hostname()
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing to load-test %q: its host is not a loopback address or localhost (use --allow-remote if you mean it)", raw)
}

type benchConfig struct {
	req         airlock.ExecuteRequest
	concurrency int
	duration    time.Duration
	requests    int // 0: bounded by the duration (and maxBenchRequests) only
	warmup      int
	perRequest  time.Duration
	rate        float64 // requests per second across all workers; 0 sends back to back
	// sessions measures POST /v1/sessions (then deletes each session)
	// instead of executions.
	sessions bool
	session  airlock.CreateSessionRequest
}

// benchResult is one measured request.
type benchResult struct {
	latency time.Duration
	outcome string // "ok", "nonzero_exit", "timed_out", "oom_killed", "failed", "api_error", "transport_error"
	status  int    // HTTP status of an api_error
	// retryAfter is what a 429 or 503 asked the client to wait: a worker
	// honours it, as a well-behaved client would.
	retryAfter time.Duration
}

func runBench(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("bench", benchUsage, std.err)
	var (
		srv              serverFlags
		lang, code, file string
		timeout          int
		cfg              benchConfig
		allowRemote      bool
		out              outputFlags
		codeSet          bool
	)
	srv.register(fs)
	fs.BoolVar(&allowRemote, "allow-remote", false, "")
	fs.StringVar(&lang, "l", "python", "")
	fs.StringVar(&lang, "language", "python", "")
	fs.Func("code", "", func(s string) error { code, codeSet = s, true; return nil })
	fs.StringVar(&file, "file", "", "")
	fs.IntVar(&timeout, "timeout", 0, "")
	fs.IntVar(&cfg.concurrency, "concurrency", 4, "")
	fs.DurationVar(&cfg.duration, "duration", 30*time.Second, "")
	fs.IntVar(&cfg.requests, "requests", 0, "")
	fs.IntVar(&cfg.warmup, "warmup", 0, "")
	fs.Float64Var(&cfg.rate, "rate", 0, "")
	out.register(fs, true)
	fs.BoolVar(&cfg.sessions, "sessions", false, "")
	fs.StringVar(&cfg.session.Image, "image", "python-ds", "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	bad := func(format string, args ...any) error { return usageError(std.err, "bench", format, args...) }
	cfg.req = airlock.ExecuteRequest{Language: airlock.Language(lang), TimeoutSec: timeout}
	switch {
	case len(pos) > 0:
		return bad("unexpected argument %q", pos[0])
	case !cfg.req.Language.Valid():
		return bad("unknown language %q (one of python, bash, node, sql)", lang)
	case codeSet && file != "":
		return bad("give --code or --file, not both")
	case cfg.concurrency < 1 || cfg.concurrency > maxBenchConcurrency:
		return bad("--concurrency must be between 1 and %d", maxBenchConcurrency)
	case cfg.duration <= 0 || cfg.duration > maxBenchDuration:
		return bad("--duration must be more than 0 and at most %v", maxBenchDuration)
	case cfg.requests < 0 || cfg.requests > maxBenchRequests:
		return bad("--requests must be between 0 and %d", maxBenchRequests)
	case cfg.warmup < 0 || cfg.warmup > maxBenchWarmup:
		return bad("--warmup must be between 0 and %d", maxBenchWarmup)
	case timeout < 0:
		return bad("--timeout must not be negative")
	case cfg.rate < 0 || cfg.rate > 10000:
		return bad("--rate must be between 0 and 10000")
	}
	if !allowRemote {
		if err := checkLocalURL(srv.serverURL()); err != nil {
			return err
		}
	}
	switch {
	case file != "":
		if code, err = readCode(file, std.in); err != nil {
			return err
		}
	case !codeSet:
		code = defaultBenchCode[cfg.req.Language]
	}
	cfg.req.Code = code
	cfg.perRequest = 2 * time.Minute
	if timeout > 0 {
		cfg.perRequest = time.Duration(timeout)*time.Second + time.Minute
	}

	c, err := srv.client(benchHTTPClient(cfg.concurrency))
	if err != nil {
		return errors.New(airlock.ErrorMessage(err))
	}
	if err := benchProbe(ctx, c, srv.serverURL()); err != nil {
		return err
	}
	s := runLoad(ctx, c, cfg)
	if out.json(std) {
		enc := json.NewEncoder(std.out)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	s.print(std.out)
	return nil
}

// benchHTTPClient keeps a connection per worker and follows no redirect,
// so the load cannot be sent on to another host.
func benchHTTPClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = conns
	tr.MaxConnsPerHost = conns
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			return errors.New("airlock bench follows no redirects")
		},
	}
}

// benchProbe checks, with one cheap read (GET /v1/executions?limit=1),
// that the server answers and takes the key, so a run against a dead server
// or with a wrong key fails at once instead of counting errors.
func benchProbe(ctx context.Context, c *client.Client, serverURL string) error {
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := c.ListExecutions(pctx, 1, "")
	var ce *client.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce) && (ce.Status == http.StatusUnauthorized || ce.Status == http.StatusForbidden):
		return errors.New(describeError(err, serverURL) + "; check --key or $AIRLOCK_API_KEY")
	case errors.As(err, &ce):
		return nil // the server answered; the run will show what it says to executions
	}
	return errors.New(describeError(err, serverURL))
}

// runLoad runs the warm-up and then the measured phase, and summarises.
func runLoad(ctx context.Context, c *client.Client, cfg benchConfig) *benchSummary {
	if cfg.warmup > 0 {
		drive(ctx, c, cfg, cfg.warmup)
	}
	limit := cfg.requests
	if limit == 0 {
		limit = maxBenchRequests
	}
	start := time.Now()
	results := drive(ctx, c, cfg, limit)
	return summarizeBench(cfg, results, time.Since(start), ctx.Err() != nil)
}

// drive sends at most limit requests with cfg.concurrency workers, starting
// none after cfg.duration, and returns the results of those that were not
// cut short by ctx.
func drive(ctx context.Context, c *client.Client, cfg benchConfig, limit int) []benchResult {
	deadline := time.Now().Add(cfg.duration)
	var (
		issued atomic.Int64
		mu     sync.Mutex
		all    []benchResult
		wg     sync.WaitGroup
	)
	// With a rate, request i may start no earlier than start + i/rate,
	// whichever worker sends it.
	start := time.Now()
	pace := func(i int64) {
		if cfg.rate <= 0 {
			return
		}
		at := start.Add(time.Duration(float64(i-1) / cfg.rate * float64(time.Second)))
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(at)):
		}
	}
	for range cfg.concurrency {
		wg.Go(func() {
			var mine []benchResult
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := issued.Add(1)
				if i > int64(limit) {
					break
				}
				pace(i)
				r, ok := benchOne(ctx, c, cfg)
				if ok {
					mine = append(mine, r)
				}
				pause := time.Duration(0)
				switch {
				case r.outcome == "transport_error":
					pause = transportBackoff // do not spin on a server that went away
				case r.retryAfter > 0:
					pause = min(r.retryAfter, time.Until(deadline))
				}
				if pause > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(pause):
					}
				}
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all
}

// benchOne sends one request and classifies it; ok is false if ctx ended
// it (an interrupt, not a result).
func benchOne(ctx context.Context, c *client.Client, cfg benchConfig) (benchResult, bool) {
	rctx, cancel := context.WithTimeout(ctx, cfg.perRequest)
	defer cancel()
	if cfg.sessions {
		return benchSession(ctx, rctx, c, cfg)
	}
	start := time.Now()
	e, err := c.Execute(rctx, cfg.req, client.WithAgentID("airlock-bench"))
	r := benchResult{latency: time.Since(start)}
	var ce *client.Error
	switch {
	case err != nil && ctx.Err() != nil:
		return r, false
	case errors.As(err, &ce):
		r.outcome, r.status, r.retryAfter = "api_error", ce.Status, ce.RetryAfter
	case err != nil:
		r.outcome = "transport_error"
	case e.Status == airlock.StatusFailed:
		r.outcome = "failed"
	case e.TimedOut:
		r.outcome = "timed_out"
	case e.OOMKilled:
		r.outcome = "oom_killed"
	case e.ExitCode != 0:
		r.outcome = "nonzero_exit"
	default:
		r.outcome = "ok"
	}
	return r, true
}

// benchSummary is what bench prints; its JSON form is the --json output.
type benchSummary struct {
	Language        airlock.Language `json:"language"`
	Concurrency     int              `json:"concurrency"`
	ElapsedSec      float64          `json:"elapsed_s"`
	Interrupted     bool             `json:"interrupted"`
	Requests        int              `json:"requests"`
	OK              int              `json:"ok"`
	Errors          int              `json:"errors"` // requests - ok
	NonZeroExit     int              `json:"nonzero_exit"`
	TimedOut        int              `json:"timed_out"`
	OOMKilled       int              `json:"oom_killed"`
	Failed          int              `json:"failed"`     // the server failed the run
	APIErrors       map[string]int   `json:"api_errors"` // by HTTP status
	TransportErrors int              `json:"transport_errors"`
	PerSecond       float64          `json:"throughput_per_s"`
	PerMinute       float64          `json:"throughput_per_min"`
	Latency         benchLatency     `json:"latency_ms"`
}

// benchLatency is in milliseconds, over the requests that returned an
// execution (every outcome but api_error and transport_error).
type benchLatency struct {
	Count int     `json:"count"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

func summarizeBench(cfg benchConfig, rs []benchResult, elapsed time.Duration, interrupted bool) *benchSummary {
	s := &benchSummary{
		Language:    cfg.req.Language,
		Concurrency: cfg.concurrency,
		ElapsedSec:  elapsed.Seconds(),
		Interrupted: interrupted,
		Requests:    len(rs),
		APIErrors:   map[string]int{},
	}
	if cfg.sessions {
		s.Language = airlock.Language("sessions of " + cfg.session.Image)
	}
	var lat []time.Duration
	for _, r := range rs {
		switch r.outcome {
		case "ok":
			s.OK++
		case "nonzero_exit":
			s.NonZeroExit++
		case "timed_out":
			s.TimedOut++
		case "oom_killed":
			s.OOMKilled++
		case "failed":
			s.Failed++
		case "api_error":
			s.APIErrors[strconv.Itoa(r.status)]++
		case "transport_error":
			s.TransportErrors++
		}
		if r.outcome != "api_error" && r.outcome != "transport_error" {
			lat = append(lat, r.latency)
		}
	}
	s.Errors = s.Requests - s.OK
	if elapsed > 0 {
		s.PerSecond = float64(s.Requests) / elapsed.Seconds()
		s.PerMinute = s.PerSecond * 60
	}
	l := summarize(lat)
	s.Latency = benchLatency{Count: l.Count, Min: ms(l.Min), P50: ms(l.P50), P95: ms(l.P95), P99: ms(l.P99), Max: ms(l.Max)}
	return s
}

func (s *benchSummary) print(w io.Writer) {
	note := ""
	if s.Interrupted {
		note = " (interrupted)"
	}
	fmt.Fprintf(w, "%d requests in %.1fs%s, %d workers, %s\n", s.Requests, s.ElapsedSec, note, s.Concurrency, s.Language)
	fmt.Fprintf(w, "  ok          %d\n", s.OK)
	fmt.Fprintf(w, "  errors      %d", s.Errors)
	if s.Errors > 0 {
		var parts []string
		add := func(name string, n int) {
			if n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", name, n))
			}
		}
		add("non-zero exit", s.NonZeroExit)
		add("timed out", s.TimedOut)
		add("out of memory", s.OOMKilled)
		add("failed by server", s.Failed)
		statuses := make([]string, 0, len(s.APIErrors))
		for st := range s.APIErrors {
			statuses = append(statuses, st)
		}
		sort.Strings(statuses)
		for _, st := range statuses {
			add("HTTP "+st, s.APIErrors[st])
		}
		add("network", s.TransportErrors)
		fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  throughput  %.2f req/s (%.0f/min)\n", s.PerSecond, s.PerMinute)
	if s.Latency.Count == 0 {
		fmt.Fprintln(w, "  latency     n/a (no request returned an execution)")
		return
	}
	l := s.Latency
	fmt.Fprintf(w, "  latency ms  min %.1f  p50 %.1f  p95 %.1f  p99 %.1f  max %.1f  (%d executions)\n",
		l.Min, l.P50, l.P95, l.P99, l.Max, l.Count)
}

// benchSession creates one session, timed until it is ready, and deletes
// it (untimed); ok is false if ctx ended it.
func benchSession(ctx, rctx context.Context, c *client.Client, cfg benchConfig) (benchResult, bool) {
	start := time.Now()
	sess, _, err := c.CreateSession(rctx, cfg.session)
	r := benchResult{latency: time.Since(start)}
	var ce *client.Error
	switch {
	case err != nil && ctx.Err() != nil:
		return r, false
	case errors.As(err, &ce):
		r.outcome, r.status = "api_error", ce.Status
	case err != nil:
		r.outcome = "transport_error"
	case sess.State != airlock.SessionReady:
		r.outcome = "failed"
	default:
		r.outcome = "ok"
	}
	if err == nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		c.DeleteSession(dctx, sess.ID)
	}
	return r, true
}
