package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckLocalURL(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:8080", true},
		{"http://127.1.2.3", true},
		{"https://localhost:8443/prefix", true},
		{"http://LOCALHOST", true},
		{"http://localhost.:80", true},
		{"http://[::1]:8080", true},
		{"http://[::ffff:127.0.0.1]:8080", true},
		{"http://10.0.0.1:8080", false},
		{"http://0.0.0.0:8080", false},
		{"http://example.com", false},
		{"http://localhost.example.com", false},
		{"http://127.0.0.1.nip.io", false},
		{"http://2130706433", false}, // 127.0.0.1 as a number: not parsed as an IP, refused
		{"http://[::]:8080", false},
		{"http://user@127.0.0.1@evil.com/", false},
		{"127.0.0.1:8080", false}, // no scheme: parses as scheme "127.0.0.1"
		{"http://[::1", false},
	}
	for _, tt := range tests {
		if err := checkLocalURL(tt.url); (err == nil) != tt.ok {
			t.Errorf("checkLocalURL(%q) = %v, want ok=%v", tt.url, err, tt.ok)
		}
	}
}

func TestBenchRefusesRemote(t *testing.T) {
	cliEnv(t)
	_, errs, code := runCLI(t, runBench, "", "--url", "http://192.0.2.1:8080", "--duration", "1s")
	if code != 1 || !strings.Contains(errs, "not a loopback address") {
		t.Errorf("exit %d stderr %q", code, errs)
	}
}

func TestBenchUsage(t *testing.T) {
	cliEnv(t)
	for _, args := range [][]string{
		{"--concurrency", "0"},
		{"--concurrency", "257"},
		{"--duration", "0s"},
		{"--duration", "2h"},
		{"--requests", "-1"},
		{"--requests", "1000001"},
		{"--warmup", "-1"},
		{"-l", "cobol"},
		{"--code", "x", "--file", "y"},
		{"extra"},
	} {
		if _, errs, code := runCLI(t, runBench, "", args...); code != 2 || errs == "" {
			t.Errorf("%q: exit %d stderr %q, want 2", args, code, errs)
		}
	}
}

func TestBench(t *testing.T) {
	cliEnv(t)
	f := newFakeServer(t)
	run := func(code string, extra ...string) benchSummary {
		t.Helper()
		args := append([]string{"--url", f.URL, "--key", fakeKey, "--json", "--concurrency", "3", "--code", code}, extra...)
		out, errs, exit := runCLI(t, runBench, "", args...)
		if exit != 0 {
			t.Fatalf("exit %d: %s", exit, errs)
		}
		var s benchSummary
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("--json output %q: %v", out, err)
		}
		return s
	}

	f.executes.Store(0)
	s := run("ok", "--requests", "20", "--warmup", "4", "--duration", "30s")
	if s.Requests != 20 || s.OK != 20 || s.Errors != 0 || s.Latency.Count != 20 || s.Concurrency != 3 {
		t.Errorf("ok run: %+v", s)
	}
	if n := f.executes.Load(); n != 24 {
		t.Errorf("server saw %d executions, want 20 + 4 warm-up", n)
	}
	if !(s.Latency.Min <= s.Latency.P50 && s.Latency.P50 <= s.Latency.P95 &&
		s.Latency.P95 <= s.Latency.P99 && s.Latency.P99 <= s.Latency.Max) || s.Latency.Max <= 0 {
		t.Errorf("latency not ordered: %+v", s.Latency)
	}
	if s.PerSecond <= 0 || s.PerMinute != s.PerSecond*60 {
		t.Errorf("throughput %v/s %v/min", s.PerSecond, s.PerMinute)
	}

	s = run("exit7", "--requests", "5")
	if s.Requests != 5 || s.NonZeroExit != 5 || s.Errors != 5 || s.Latency.Count != 5 {
		t.Errorf("exit7 run: %+v", s)
	}
	s = run("ratelimit", "--requests", "6")
	if s.APIErrors["429"] != 6 || s.Errors != 6 || s.Latency.Count != 0 {
		t.Errorf("429 run: %+v", s)
	}

	// Bounded by time: no --requests, a short duration.
	s = run("ok", "--duration", "200ms")
	if s.Requests == 0 || s.ElapsedSec > 5 {
		t.Errorf("timed run: %+v", s)
	}

	// Human output.
	out, _, code := runCLI(t, runBench, "", "--url", f.URL, "--key", fakeKey, "--code", "special", "--requests", "3")
	for _, want := range []string{"3 requests in", "ok          0", "errors      3 (timed out 3)", "throughput", "latency ms  min"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// A wrong key fails the probe before any execution.
	f.executes.Store(0)
	_, errs, code := runCLI(t, runBench, "", "--url", f.URL, "--key", "alk_wrong", "--requests", "3")
	if code != 1 || !strings.Contains(errs, "HTTP 401") || f.executes.Load() != 0 {
		t.Errorf("wrong key: exit %d stderr %q executions %d", code, errs, f.executes.Load())
	}
}

// bench --sessions creates sessions on a real server, timed until each is
// ready, and deletes every one it made.
func TestBenchSessions(t *testing.T) {
	url, key := sessionServer(t)
	out, errs, exit := runCLI(t, runBench, "", "--url", url, "--key", key, "--json", "--sessions", "--image", "base",
		"--concurrency", "2", "--requests", "4")
	if exit != 0 {
		t.Fatalf("exit %d: %s", exit, errs)
	}
	var s benchSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	if s.Requests != 4 || s.OK != 4 || s.Errors != 0 || s.Latency.P50 <= 0 || s.Language != "sessions of base" {
		t.Fatalf("summary %+v", s)
	}
	out, errs, exit = runCLI(t, runSession, "", "ls", "--url", url, "--key", key)
	if exit != 0 || strings.Count(strings.TrimSpace(out), "\n") > 0 {
		t.Errorf("live sessions after the run (want only a header, if anything): %q %q %d", out, errs, exit)
	}
}
