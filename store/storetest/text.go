package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// testHostileText: what a sandbox printed or sent is any bytes (NUL,
// invalid UTF-8); storing it never fails and the readable text around
// it comes back. A lookup by such a key is a client error or not found,
// never an internal error.
func testHostileText(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	tn := mustTenant(t, db, "acme")
	const nasty = "before\x00mid\xff\xfe\xc3after"
	e := mustExecution(t, db, tn.ID)
	e.Status, e.Stdout, e.Stderr, e.Error = airlock.StatusCompleted, nasty, nasty, nasty
	e.Findings = []airlock.GuardFinding{{Rule: "r", Severity: airlock.SeverityCritical, Excerpt: nasty}}
	e.Artifacts = []airlock.Artifact{{Filename: "out\xff.txt", ContentType: "text/plain"}}
	if err := db.FinishExecution(ctx, e); err != nil {
		t.Fatalf("FinishExecution with NUL and invalid UTF-8: %v", err)
	}
	got, err := db.Execution(ctx, tn.ID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	for what, s := range map[string]string{"stdout": got.Stdout, "stderr": got.Stderr, "error": got.Error} {
		if !strings.HasPrefix(s, "before") || !strings.HasSuffix(s, "after") || !strings.Contains(s, "mid") {
			t.Errorf("%s read back as %q", what, s)
		}
	}
	if len(got.Artifacts) != 1 || !strings.HasPrefix(got.Artifacts[0].Filename, "out") {
		t.Errorf("artifacts %+v", got.Artifacts)
	}

	s := newSession(tn.ID)
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.State, s.EndDetail, s.EndReason = airlock.SessionFailed, nasty, airlock.EndSandboxExited
	if err := db.UpdateSession(ctx, s); err != nil {
		t.Fatalf("UpdateSession with a hostile end detail: %v", err)
	}
	if err := db.PutE2BSandbox(ctx, &airlock.E2BSandbox{SandboxID: s.ID, TenantID: tn.ID, TemplateID: "base",
		Metadata: map[string]string{"k\x00": nasty}, EnvVars: map[string]string{"A": "\\u0000" + nasty}}); err != nil {
		t.Fatalf("PutE2BSandbox with hostile metadata: %v", err)
	}
	rec, err := db.E2BSandbox(ctx, s.ID)
	if err != nil || !strings.HasPrefix(rec.EnvVars["A"], `\u0000before`) {
		t.Errorf("e2b record read back: %+v %v", rec, err)
	}
	ev := &airlock.EgressEvent{TenantID: tn.ID, SessionID: s.ID, Time: time.Unix(1, 0), Kind: airlock.EgressConnection,
		Name: nasty, SNI: strings.Repeat("\xff", 5000), Host: nasty, Detail: nasty, Verdict: airlock.VerdictDenied}
	if err := db.RecordEgress(ctx, []*airlock.EgressEvent{ev}); err != nil {
		t.Fatalf("RecordEgress with hostile names: %v", err)
	}
	if err := db.RecordAbuseEvent(ctx, &airlock.AbuseEvent{TenantID: tn.ID, Detector: airlock.DetectorScanning,
		Action: airlock.ActionKilled, Summary: nasty, Evidence: map[string]any{"seen": nasty}}); err != nil {
		t.Fatalf("RecordAbuseEvent with a hostile summary: %v", err)
	}

	for _, key := range []string{"\x00", "\xff", "a\x00b"} {
		_, err := db.Execution(ctx, tn.ID, key)
		if c := airlock.ErrorCode(err); c != airlock.ENOTFOUND && c != airlock.EINVALID {
			t.Errorf("Execution(%q): %v, want not found or invalid", key, err)
		}
		_, err = db.Session(ctx, tn.ID, key)
		if c := airlock.ErrorCode(err); c != airlock.ENOTFOUND && c != airlock.EINVALID {
			t.Errorf("Session(%q): %v, want not found or invalid", key, err)
		}
		_, err = db.TenantByKeyHash(ctx, key)
		if c := airlock.ErrorCode(err); c != airlock.ENOTFOUND && c != airlock.EINVALID {
			t.Errorf("TenantByKeyHash(%q): %v, want not found or invalid", key, err)
		}
	}
}
