package session_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/service/session"
)

// metricsInterval is the sampling interval of the metrics tests.
const metricsInterval = 200 * time.Millisecond

// samplesAfter waits until the session has a sample taken after t and
// returns the session's samples from t on.
func samplesAfter(t *testing.T, c *client.Client, id string, since time.Time) []airlock.MetricSample {
	t.Helper()
	var got *airlock.SessionMetrics
	var err error
	if !testreq.Poll(30*time.Second, func() bool {
		got, err = c.SessionMetrics(ctxFor(t, time.Minute), id, since, time.Time{})
		return err == nil && len(got.Samples) > 0
	}) {
		t.Fatalf("no sample of session %s after %s: %v", id, since.Format(time.RFC3339Nano), err)
	}
	return got.Samples
}

// peak is the largest value of f over the samples.
func peak(ss []airlock.MetricSample, f func(airlock.MetricSample) float64) float64 {
	m := 0.0
	for _, s := range ss {
		m = max(m, f(s))
	}
	return m
}

// A running session is sampled at the interval from the host; what its
// code does shows in the samples (CPU, memory, disk); start and end
// select; the samples outlive the session; other tenants and revoked
// keys get nothing.
func TestSessionMetrics(t *testing.T) {
	s := newStack(t, func(c *session.Config) { c.SampleInterval = metricsInterval })
	sess := s.create(s.a, airlock.CreateSessionRequest{})

	t.Run("interval", func(t *testing.T) {
		var got *airlock.SessionMetrics
		var err error
		if !testreq.Poll(30*time.Second, func() bool {
			got, err = s.a.c.SessionMetrics(ctxFor(t, time.Minute), sess.ID, time.Time{}, time.Time{})
			return err == nil && len(got.Samples) >= 5
		}) {
			t.Fatalf("fewer than 5 samples: %+v %v", got, err)
		}
		ss := got.Samples
		for i := 1; i < len(ss); i++ {
			gap := ss[i].At.Sub(ss[i-1].At)
			if gap <= 0 || gap > 10*metricsInterval {
				t.Errorf("samples %d and %d are %s apart; the interval is %s", i-1, i, gap, metricsInterval)
			}
		}
		for _, x := range ss {
			if x.MemoryBytes <= 0 || x.DiskBytes <= 0 || x.CPUPct < 0 || x.CPUPct > 100 {
				t.Errorf("implausible sample %+v", x)
			}
		}
	})

	t.Run("cpu", func(t *testing.T) {
		since := time.Now()
		s.shell(s.a, sess.ID, `end=$(($(date +%s)+3)); while [ $(date +%s) -lt $end ]; do :; done`)
		ss := samplesAfter(t, s.a.c, sess.ID, since)
		if p := peak(ss, func(x airlock.MetricSample) float64 { return x.CPUPct }); p < 50 {
			t.Errorf("a CPU-bound loop of 3 s peaked at %.1f%% CPU: %+v", p, ss)
		}
	})

	t.Run("memory", func(t *testing.T) {
		before := samplesAfter(t, s.a.c, sess.ID, time.Now().Add(-time.Second))
		base := before[len(before)-1].MemoryBytes
		since := time.Now()
		s.shell(s.a, sess.ID, `python3 -c "import time; b = bytearray(300 << 20); time.sleep(2)"`)
		ss := samplesAfter(t, s.a.c, sess.ID, since)
		if p := int64(peak(ss, func(x airlock.MetricSample) float64 { return float64(x.MemoryBytes) })); p < base+200<<20 {
			t.Errorf("holding 300 MiB raised memory from %d to at most %d bytes", base, p)
		}
	})

	t.Run("disk", func(t *testing.T) {
		before := samplesAfter(t, s.a.c, sess.ID, time.Now().Add(-time.Second))
		base := before[len(before)-1].DiskBytes
		s.shell(s.a, sess.ID, `head -c 64000000 /dev/urandom > /workspace/big && sync`)
		var last airlock.MetricSample
		if !testreq.Poll(30*time.Second, func() bool {
			ss := samplesAfter(t, s.a.c, sess.ID, time.Now().Add(-time.Second))
			last = ss[len(ss)-1]
			return last.DiskBytes >= base+60_000_000
		}) {
			t.Errorf("writing 64 MB raised disk from %d to %d bytes", base, last.DiskBytes)
		}
	})

	t.Run("range", func(t *testing.T) {
		all, err := s.a.c.SessionMetrics(ctxFor(t, time.Minute), sess.ID, time.Time{}, time.Time{})
		if err != nil || len(all.Samples) < 5 {
			t.Fatalf("all samples: %v", err)
		}
		from, to := all.Samples[1].At, all.Samples[3].At
		got, err := s.a.c.SessionMetrics(ctxFor(t, time.Minute), sess.ID, from, to)
		if err != nil || len(got.Samples) != 3 || !got.Samples[0].At.Equal(from) || !got.Samples[2].At.Equal(to) {
			t.Errorf("samples from %s to %s: %+v %v", from, to, got, err)
		}
		for _, q := range []string{"start=yesterday", "end=2026-13-01T00:00:00Z", "start=2026-01-02T00:00:00Z&end=2026-01-01T00:00:00Z"} {
			code, ctype, body := s.raw(http.MethodGet, "/v1/sessions/"+sess.ID+"/metrics?"+q, s.a.key, "", nil)
			if code != http.StatusBadRequest || ctype != "application/problem+json" || !contains(body, "invalid-time") {
				t.Errorf("?%s: %d %s %s", q, code, ctype, body)
			}
		}
	})

	t.Run("others", func(t *testing.T) {
		_, err := s.b.c.SessionMetrics(ctxFor(t, time.Minute), sess.ID, time.Time{}, time.Time{})
		wantProblem(t, "another tenant's session", err, http.StatusNotFound, "session-not-found")
		_, err = s.a.c.SessionMetrics(ctxFor(t, time.Minute), "no-such-session", time.Time{}, time.Time{})
		wantProblem(t, "a missing session", err, http.StatusNotFound, "session-not-found")
		secret, key := airlock.NewAPIKey(s.a.tenant.ID, "", time.Now())
		if err := s.store.CreateAPIKey(context.Background(), key); err != nil {
			t.Fatal(err)
		}
		if code, _, _ := s.raw(http.MethodGet, "/v1/sessions/"+sess.ID+"/metrics", secret, "", nil); code != http.StatusOK {
			t.Fatalf("a fresh key of the tenant: %d", code)
		}
		if _, err := s.store.RevokeAPIKey(context.Background(), key.ID); err != nil {
			t.Fatal(err)
		}
		if code, _, body := s.raw(http.MethodGet, "/v1/sessions/"+sess.ID+"/metrics", secret, "", nil); code != http.StatusUnauthorized {
			t.Errorf("a revoked key: %d %s", code, body)
		}
		if code, _, _ := s.raw(http.MethodGet, "/v1/sessions/"+sess.ID+"/metrics", "", "", nil); code != http.StatusUnauthorized {
			t.Errorf("no key: %d", code)
		}
	})

	t.Run("kept after the end", func(t *testing.T) {
		if _, err := s.a.c.DeleteSession(ctxFor(t, time.Minute), sess.ID); err != nil {
			t.Fatal(err)
		}
		got, err := s.a.c.SessionMetrics(ctxFor(t, time.Minute), sess.ID, time.Time{}, time.Time{})
		if err != nil || len(got.Samples) < 5 {
			t.Fatalf("an ended session's samples: %+v %v", got, err)
		}
		st, err := s.a.c.Session(ctxFor(t, time.Minute), sess.ID)
		if err != nil || st.LastSample == nil || st.LastSample.At.After(*st.EndedAt) || st.EndLimit != "" {
			t.Errorf("a deleted session: last sample %+v, end limit %q, %v", st.LastSample, st.EndLimit, err)
		}
	})
	s.checkClean()
}

// TestSessionMemoryLimitSamples: programs of a session that together allocate past its memory limit are
// killed inside the sandbox (gVisor's kernel chooses; the session goes
// on): the exec's answer says so (limits_hit memory), and the samples
// show the memory at the limit.
func TestSessionMemoryLimitSamples(t *testing.T) {
	s := newStack(t, func(c *session.Config) {
		c.SampleInterval = metricsInterval
		c.Sizes = map[airlock.SessionSize]session.Size{airlock.SizeSmall: {CPUs: 1, MemoryBytes: 256 << 20, DiskBytes: 256 << 20, Pids: 256}}
	})
	sess := s.create(s.a, airlock.CreateSessionRequest{})
	samplesAfter(t, s.a.c, sess.ID, time.Time{})
	since := time.Now()
	// Each process stays under the per-process limit; four together do
	// not fit.
	one := `python3 -c "import time; b = bytearray(150 << 20); time.sleep(20)" & `
	e, err := s.a.c.Exec(ctxFor(t, 2*time.Minute), sess.ID, airlock.SessionExecRequest{Shell: one + one + one + one + "wait"})
	if err != nil {
		t.Fatalf("an exec past the memory limit: %v", err)
	}
	hit := false
	for _, l := range e.LimitsHit {
		hit = hit || l == airlock.LimitMemory
	}
	if !hit {
		t.Errorf("exec past the memory limit: ended_by %q, limits_hit %v, exit %d", e.EndedBy, e.LimitsHit, e.ExitCode)
	}
	ss := samplesAfter(t, s.a.c, sess.ID, since)
	if p := int64(peak(ss, func(x airlock.MetricSample) float64 { return float64(x.MemoryBytes) })); p < 192<<20 {
		t.Errorf("memory peaked at %d bytes in the samples; the limit is %d", p, 256<<20)
	}
	st, err := s.a.c.Session(ctxFor(t, time.Minute), sess.ID)
	if err != nil || st.State != airlock.SessionReady {
		t.Errorf("the session after its programs ran out of memory: %+v %v", st, err)
	}
	if _, err := s.a.c.DeleteSession(ctxFor(t, time.Minute), sess.ID); err != nil {
		t.Fatal(err)
	}
	s.checkClean()
}
