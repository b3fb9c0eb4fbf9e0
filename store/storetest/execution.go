package storetest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

func testExecutionLifecycle(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	tn := mustTenant(t, db, "acme")

	e := &airlock.Execution{
		TenantID:   tn.ID,
		SessionID:  "sess-1",
		AgentID:    "agent-7",
		Language:   airlock.Python,
		Image:      "python-3.12@sha256:feed",
		CodeSHA256: "c0de",
		TraceID:    "4bf92f3577b34da6a3ce929d0e0e4736", // kept as given (migration 0014)
	}
	if err := db.CreateExecution(ctx, e); err != nil {
		t.Fatal(err)
	}
	if e.ID == "" || e.Status != airlock.StatusRunning || e.CreatedAt.IsZero() || e.FinishedAt != nil {
		t.Fatalf("after CreateExecution: %+v", e)
	}
	got, err := db.Execution(ctx, tn.ID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := *e
	want.Artifacts = []airlock.Artifact{}
	if !reflect.DeepEqual(got, &want) {
		t.Errorf("running execution:\n got %+v\nwant %+v", got, &want)
	}

	e.Status = airlock.StatusCompleted
	e.ExitCode = 3
	e.Stdout, e.Stderr = "hello\n", strings.Repeat("e", 1000)
	e.StdoutTruncated, e.StderrTruncated = false, true
	e.DurationMS, e.PeakMemoryMB = 1234, 56
	e.TimedOut, e.OOMKilled, e.HadNetworkAttempt, e.ArtifactsTruncated = true, true, true, true
	e.EndedBy = airlock.LimitMemory
	e.LastSample = &airlock.MetricSample{At: time.Date(2026, 12, 2, 8, 0, 0, 250e6, time.UTC), CPUPct: 97.5,
		MemoryBytes: 500 << 20, DiskBytes: 4096, NetRxBytes: 1, NetTxBytes: 2}
	e.Artifacts = []airlock.Artifact{
		{Filename: "plot.png", SizeBytes: 10, ContentType: "image/png", SHA256: "p"},
		{ID: "art-given", Filename: "a.csv", SizeBytes: 20, ContentType: "text/csv", SHA256: "a"},
		{Filename: "out/z.txt", SizeBytes: 0, ContentType: "text/plain", SHA256: "z"},
	}
	if err := db.FinishExecution(ctx, e); err != nil {
		t.Fatal(err)
	}
	if e.FinishedAt == nil || !e.FinishedAt.After(e.CreatedAt) {
		t.Errorf("FinishedAt = %v, want after %v", e.FinishedAt, e.CreatedAt)
	}
	got, err = db.Execution(ctx, tn.ID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	want = *e
	want.Artifacts = slices.Clone(e.Artifacts)
	slices.SortFunc(want.Artifacts, func(a, b airlock.Artifact) int { return strings.Compare(a.Filename, b.Filename) })
	if !reflect.DeepEqual(got, &want) {
		t.Errorf("finished execution:\n got %+v\nwant %+v", got, &want)
	}
	for _, a := range got.Artifacts {
		ga, err := db.Artifact(ctx, tn.ID, a.ID)
		if err != nil || *ga != a {
			t.Errorf("Artifact(%s) = %+v, %v; want %+v", a.ID, ga, err, a)
		}
	}

	errs := []struct {
		name string
		e    *airlock.Execution
		code string
	}{
		{"finish twice", &airlock.Execution{ID: e.ID, TenantID: tn.ID, Status: airlock.StatusFailed}, airlock.ECONFLICT},
		{"finish unknown", &airlock.Execution{ID: "nope", TenantID: tn.ID, Status: airlock.StatusCompleted}, airlock.ENOTFOUND},
		{"finish without status", &airlock.Execution{ID: e.ID, TenantID: tn.ID}, airlock.EINVALID},
		{"finish as running", &airlock.Execution{ID: e.ID, TenantID: tn.ID, Status: airlock.StatusRunning}, airlock.EINVALID},
		{"finish without id", &airlock.Execution{TenantID: tn.ID}, airlock.EINVALID},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			wantCode(t, "FinishExecution", db.FinishExecution(ctx, tt.e), tt.code)
		})
	}

	createErrs := []struct {
		name string
		e    *airlock.Execution
		code string
	}{
		{"duplicate id", &airlock.Execution{ID: e.ID, TenantID: tn.ID, Language: airlock.Bash}, airlock.ECONFLICT},
		{"unknown tenant", &airlock.Execution{TenantID: "nope", Language: airlock.Bash}, airlock.ENOTFOUND},
		{"no tenant", &airlock.Execution{Language: airlock.Bash}, airlock.EINVALID},
		{"no language", &airlock.Execution{TenantID: tn.ID}, airlock.EINVALID},
		{"not running", &airlock.Execution{TenantID: tn.ID, Language: airlock.Bash, Status: airlock.StatusCompleted}, airlock.EINVALID},
	}
	for _, tt := range createErrs {
		t.Run(tt.name, func(t *testing.T) {
			wantCode(t, "CreateExecution", db.CreateExecution(ctx, tt.e), tt.code)
		})
	}
}

// TestFinishExecutionAtomic checks that a failing artifact insert leaves the
// execution running and unchanged.
func testFinishExecutionAtomic(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	tn := mustTenant(t, db, "acme")
	e := mustExecution(t, db, tn.ID)

	fin := *e
	fin.Status, fin.Stdout = airlock.StatusCompleted, "partial"
	fin.Artifacts = []airlock.Artifact{
		{ID: "same", Filename: "a"},
		{ID: "same", Filename: "b"},
	}
	wantCode(t, "FinishExecution", db.FinishExecution(ctx, &fin), airlock.ECONFLICT)
	got, err := db.Execution(ctx, tn.ID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != airlock.StatusRunning || got.Stdout != "" || len(got.Artifacts) != 0 {
		t.Errorf("after a failed finish: %+v", got)
	}
	if _, err := db.Artifact(ctx, tn.ID, "same"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("artifact of a failed finish is visible: %v", err)
	}
}

func testTenantIsolation(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a := mustTenant(t, db, "tenant-a")
	b := mustTenant(t, db, "tenant-b")
	ea := mustExecution(t, db, a.ID)
	ea.Status, ea.Artifacts = airlock.StatusCompleted, []airlock.Artifact{{Filename: "secret.txt", SizeBytes: 1}}
	if err := db.FinishExecution(ctx, ea); err != nil {
		t.Fatal(err)
	}
	art := ea.Artifacts[0].ID
	eb := mustExecution(t, db, b.ID)

	tests := []struct {
		name string
		do   func() error
		code string
	}{
		{"B reads A's execution", func() error { _, err := db.Execution(ctx, b.ID, ea.ID); return err }, airlock.ENOTFOUND},
		{"B reads A's artifact", func() error { _, err := db.Artifact(ctx, b.ID, art); return err }, airlock.ENOTFOUND},
		{"no tenant reads A's execution", func() error { _, err := db.Execution(ctx, "", ea.ID); return err }, airlock.ENOTFOUND},
		{"B finishes A's execution", func() error {
			return db.FinishExecution(ctx, &airlock.Execution{ID: ea.ID, TenantID: b.ID, Status: airlock.StatusFailed})
		}, airlock.ENOTFOUND},
		{"B pages from A's cursor", func() error {
			_, err := db.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: b.ID, Before: ea.ID})
			return err
		}, airlock.EINVALID},
		{"list without tenant", func() error {
			_, err := db.ListExecutions(ctx, airlock.ExecutionFilter{})
			return err
		}, airlock.EINVALID},
		{"artifact claims another tenant", func() error {
			return db.FinishExecution(ctx, &airlock.Execution{ID: eb.ID, TenantID: b.ID,
				Status: airlock.StatusCompleted, Artifacts: []airlock.Artifact{{TenantID: a.ID, Filename: "x"}}})
		}, airlock.EINVALID},
		{"A reads own execution", func() error { _, err := db.Execution(ctx, a.ID, ea.ID); return err }, ""},
		{"A reads own artifact", func() error { _, err := db.Artifact(ctx, a.ID, art); return err }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCode(t, tt.name, tt.do(), tt.code)
		})
	}

	list, err := db.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: b.ID})
	if err != nil || len(list) != 1 || list[0].ID != eb.ID {
		t.Errorf("B's list = %v, %v; want only %s", list, err, eb.ID)
	}
}

func testListExecutionsPagination(t *testing.T, bk Backend) {
	ctx := context.Background()
	c := newClock()
	db := bk.Open(t, bk.New(t), c.Now)
	tn := mustTenant(t, db, "acme")
	other := mustTenant(t, db, "other")

	// Seven executions; three share one created_at, so order among them
	// falls to the ID.
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := []time.Time{base, base.Add(time.Minute), base.Add(time.Minute), base.Add(time.Minute),
		base.Add(2 * time.Minute), base.Add(3 * time.Minute), base.Add(-time.Hour)}
	var want []*airlock.Execution
	for i, ts := range at {
		e := &airlock.Execution{ID: fmt.Sprintf("exec-%d", (i*5)%7), TenantID: tn.ID,
			Language: airlock.Bash, CreatedAt: ts, Stdout: "out"}
		if err := db.CreateExecution(ctx, e); err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
		mustExecution(t, db, other.ID) // noise from another tenant
	}
	slices.SortFunc(want, func(a, b *airlock.Execution) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})

	var got []string
	var sizes []int
	cursor := ""
	for range 10 {
		page, err := db.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tn.ID, Limit: 3, Before: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		sizes = append(sizes, len(page))
		for _, e := range page {
			if e.TenantID != tn.ID || e.Stdout != "" || e.Stderr != "" || e.Artifacts != nil {
				t.Errorf("listed execution %s: tenant %s stdout %q artifacts %v", e.ID, e.TenantID, e.Stdout, e.Artifacts)
			}
			got = append(got, e.ID)
		}
		cursor = page[len(page)-1].ID
	}
	var wantIDs []string
	for _, e := range want {
		wantIDs = append(wantIDs, e.ID)
	}
	if !slices.Equal(sizes, []int{3, 3, 1}) {
		t.Errorf("page sizes %v, want [3 3 1]", sizes)
	}
	if !slices.Equal(got, wantIDs) {
		t.Errorf("order %v, want %v", got, wantIDs)
	}
}

func testListExecutionsLimit(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	tn := mustTenant(t, db, "acme")
	for range bk.MaxListLimit + 1 {
		mustExecution(t, db, tn.ID)
	}
	tests := []struct {
		limit, want int
	}{
		{0, bk.DefaultListLimit},
		{-5, bk.DefaultListLimit},
		{1, 1},
		{bk.MaxListLimit, bk.MaxListLimit},
		{bk.MaxListLimit + 100, bk.MaxListLimit},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.limit), func(t *testing.T) {
			page, err := db.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tn.ID, Limit: tt.limit})
			if err != nil || len(page) != tt.want {
				t.Errorf("Limit %d: %d rows, %v; want %d", tt.limit, len(page), err, tt.want)
			}
		})
	}
}

func testFailRunningExecutions(t *testing.T, bk Backend) {
	ctx := context.Background()
	c := newClock()
	db := bk.Open(t, bk.New(t), c.Now)
	a := mustTenant(t, db, "a")
	b := mustTenant(t, db, "b")
	running := []*airlock.Execution{mustExecution(t, db, a.ID), mustExecution(t, db, a.ID), mustExecution(t, db, b.ID)}
	done := mustExecution(t, db, a.ID)
	done.Status, done.ExitCode = airlock.StatusCompleted, 1
	if err := db.FinishExecution(ctx, done); err != nil {
		t.Fatal(err)
	}

	n, err := db.FailRunningExecutions(ctx, "airlockd restarted")
	if err != nil || n != len(running) {
		t.Fatalf("FailRunningExecutions = %d, %v; want %d", n, err, len(running))
	}
	for _, e := range running {
		got, err := db.Execution(ctx, e.TenantID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != airlock.StatusFailed || got.Error != "airlockd restarted" || got.FinishedAt == nil {
			t.Errorf("%s after fail: status %s error %q finished %v", e.ID, got.Status, got.Error, got.FinishedAt)
		}
	}
	got, err := db.Execution(ctx, a.ID, done.ID)
	if err != nil || got.Status != airlock.StatusCompleted || got.Error != "" || !got.FinishedAt.Equal(*done.FinishedAt) {
		t.Errorf("finished execution changed: %+v, %v", got, err)
	}
	if n, err := db.FailRunningExecutions(ctx, "again"); n != 0 || err != nil {
		t.Errorf("second FailRunningExecutions = %d, %v; want 0", n, err)
	}
	running[0].Status = airlock.StatusCompleted
	wantCode(t, "finish a failed execution", db.FinishExecution(ctx, running[0]), airlock.ECONFLICT)
}

func testConcurrentWriters(t *testing.T, bk Backend) {
	const writers, each = 8, 50
	ctx := context.Background()
	db := bk.Open(t, bk.New(t), time.Now)
	tn := mustTenant(t, db, "acme")

	var wg sync.WaitGroup
	errc := make(chan error, writers*each+writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e := &airlock.Execution{TenantID: tn.ID, Language: airlock.Python, AgentID: fmt.Sprint(w)}
				if err := db.CreateExecution(ctx, e); err != nil {
					errc <- fmt.Errorf("writer %d create %d: %w", w, i, err)
					continue
				}
				if i%2 == 0 {
					e.Status, e.Artifacts = airlock.StatusCompleted, []airlock.Artifact{{Filename: "f"}}
					if err := db.FinishExecution(ctx, e); err != nil {
						errc <- fmt.Errorf("writer %d finish %d: %w", w, i, err)
					}
				}
			}
		}()
	}
	// Readers run alongside.
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := db.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tn.ID, Limit: 20}); err != nil {
					errc <- fmt.Errorf("reader: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}

	seen := map[string]bool{}
	cursor := ""
	for {
		page, err := db.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tn.ID, Limit: bk.MaxListLimit, Before: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if seen[e.ID] {
				t.Fatalf("execution %s listed twice", e.ID)
			}
			seen[e.ID] = true
		}
		cursor = page[len(page)-1].ID
	}
	if len(seen) != writers*each {
		t.Errorf("%d executions stored, want %d", len(seen), writers*each)
	}
}

// testTwoHandles opens the database twice, as two processes (or two
// nodes) would, and writes through both at once: nothing may fail
// (SQLite: busy_timeout and immediate transactions keep SQLITE_BUSY
// away) and nothing may be lost.
func testTwoHandles(t *testing.T, bk Backend) {
	ctx := context.Background()
	loc := bk.New(t)
	dbs := []Store{bk.Open(t, loc, time.Now), bk.Open(t, loc, time.Now)}
	tn := mustTenant(t, dbs[0], "acme")

	var wg sync.WaitGroup
	errc := make(chan error, 100)
	for i := range 4 {
		db := dbs[i%2]
		wg.Go(func() {
			for range 25 {
				e := &airlock.Execution{TenantID: tn.ID, Language: airlock.Node}
				if err := db.CreateExecution(ctx, e); err != nil {
					errc <- err
					return
				}
				e.Status = airlock.StatusFailed
				if err := db.FinishExecution(ctx, e); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	page, err := dbs[1].ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tn.ID, Limit: 500})
	if err != nil || len(page) != 100 {
		t.Errorf("listed %d, %v; want 100", len(page), err)
	}
}

// Executions of a live session are left to the session service (which
// adopts or fails them when it recovers); those of an ended session are
// failed with the one-shot ones.
func testRunningExecutionsOfSessions(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.Open(t, bk.New(t), newClock().Now)
	a := mustTenant(t, db, "a")
	liveS := &airlock.Session{TenantID: a.ID, Image: "base", Size: airlock.SizeSmall, Backend: "gvisor", StartSource: airlock.StartPool}
	endedS := &airlock.Session{TenantID: a.ID, Image: "base", Size: airlock.SizeSmall}
	for _, s := range []*airlock.Session{liveS, endedS} {
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	liveS.State = airlock.SessionReady
	endedS.State = airlock.SessionFailed
	for _, s := range []*airlock.Session{liveS, endedS} {
		if err := db.UpdateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.Session(ctx, a.ID, liveS.ID)
	if err != nil || got.Backend != "gvisor" || got.StartSource != airlock.StartPool {
		t.Fatalf("backend and start source of the session record: %+v %v", got, err)
	}
	inLive := mustExecution(t, db, a.ID, func(e *airlock.Execution) { e.SessionID = liveS.ID })
	inEnded := mustExecution(t, db, a.ID, func(e *airlock.Execution) { e.SessionID = endedS.ID })
	oneShot := mustExecution(t, db, a.ID)
	if n, err := db.FailRunningExecutions(ctx, "restarted"); err != nil || n != 2 {
		t.Fatalf("FailRunningExecutions = %d, %v; want the one-shot and the ended session's", n, err)
	}
	for _, e := range []*airlock.Execution{inEnded, oneShot} {
		if got, _ := db.Execution(ctx, a.ID, e.ID); got.Status != airlock.StatusFailed {
			t.Errorf("%s: %s, want failed", e.ID, got.Status)
		}
	}
	runs, err := db.RunningExecutions(ctx, liveS.ID)
	if err != nil || len(runs) != 1 || runs[0].ID != inLive.ID || runs[0].Status != airlock.StatusRunning {
		t.Fatalf("RunningExecutions of the live session: %+v %v", runs, err)
	}
	if runs, err := db.RunningExecutions(ctx, endedS.ID); err != nil || len(runs) != 0 {
		t.Errorf("RunningExecutions of the ended session: %+v %v", runs, err)
	}
}

// testRecordPhase: phases add to a finished execution's record, one at a
// time, and another tenant cannot touch it.
func testRecordPhase(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a, o := mustTenant(t, db, "a"), mustTenant(t, db, "other")
	e := mustExecution(t, db, a.ID)
	e.Status, e.Phases = airlock.StatusCompleted, map[string]float64{"acquire": 1.5}
	if err := db.FinishExecution(ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordPhase(ctx, a.ID, e.ID, "destroy", 2.25); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordPhase(ctx, a.ID, e.ID, "acquire", 3); err != nil {
		t.Fatal(err)
	}
	got, err := db.Execution(ctx, a.ID, e.ID)
	if err != nil || !reflect.DeepEqual(got.Phases, map[string]float64{"acquire": 3, "destroy": 2.25}) {
		t.Fatalf("phases %v %v", got.Phases, err)
	}
	wantCode(t, "another tenant's", db.RecordPhase(ctx, o.ID, e.ID, "destroy", 1), airlock.ENOTFOUND)
	wantCode(t, "unknown", db.RecordPhase(ctx, a.ID, "nope", "destroy", 1), airlock.ENOTFOUND)
	wantCode(t, "empty phase", db.RecordPhase(ctx, a.ID, e.ID, "", 1), airlock.EINVALID)
}
