package session_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// An agent at work: create a session, upload a CSV, load it with pandas in
// a code context, plot it in a second cell (the PNG comes back without
// savefig), list the workspace with a shell command, download a file the
// code wrote, delete the session; afterwards nothing of it is left on the
// host.
func TestAgentScenario(t *testing.T) {
	s := newStack(t, nil)
	ctx := ctxFor(t, 5*time.Minute)
	c := s.a.c

	start := time.Now()
	sess, created, err := c.CreateSession(ctx, airlock.CreateSessionRequest{
		Image: "python-ds", Size: airlock.SizeSmall, TimeoutS: 600,
		Network: &airlock.NetworkPolicy{Mode: airlock.NetworkNone}, BrokerScopes: []string{},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("session ready in %v", time.Since(start))
	if !created || sess.State != airlock.SessionReady || sess.Image != "python-ds" || sess.TenantID != s.a.tenant.ID ||
		sess.Limits.MemoryBytes != 1<<30 || sess.Limits.ProcessMemoryBytes >= sess.Limits.MemoryBytes || sess.Limits.TimeoutS != 600 {
		t.Fatalf("session %+v", sess)
	}
	if d := sess.ExpiresAt.Sub(sess.CreatedAt); d != 600*time.Second {
		t.Errorf("expires %v after creation", d)
	}

	csv := "month,revenue\n1,10\n2,25\n3,18\n4,35\n"
	if res, err := c.PutFile(ctx, sess.ID, "data.csv", strings.NewReader(csv), int64(len(csv))); err != nil || res.Size != int64(len(csv)) {
		t.Fatalf("upload: %+v %v", res, err)
	}

	cc, err := c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.RunCell(ctx, sess.ID, cc.ID, airlock.RunCellRequest{Code: "import pandas as pd\ndf = pd.read_csv('data.csv')\nprint(len(df), 'rows')\ndf"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Error != nil || r.Stdout != "4 rows\n" || !strings.Contains(r.Value, "revenue") || !hasOutput(r, "text/html", "<table") {
		t.Fatalf("load cell: %+v", r)
	}

	r, err = c.RunCell(ctx, sess.ID, cc.ID, airlock.RunCellRequest{Code: "import matplotlib.pyplot as plt\nplt.figure(figsize=(6, 3))\nplt.plot(df['month'], df['revenue'])\nplt.title('Revenue')\nplt.show()\ndf['revenue'].sum()"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Error != nil || r.Value != "88" {
		t.Fatalf("plot cell: %+v", r)
	}
	pngs := 0
	for _, o := range r.Outputs {
		if o.Type == "image/png" {
			b, err := base64.StdEncoding.DecodeString(o.Data)
			if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
				t.Fatalf("figure is not a PNG: %v", err)
			}
			pngs++
		}
	}
	if pngs != 1 || r.Stderr != "" {
		t.Fatalf("plot cell: %d PNGs, stderr %q", pngs, r.Stderr)
	}

	e := s.shell(s.a, sess.ID, "python3 -c \"open('report.txt', 'w').write('total 88\\n')\" && ls -la /workspace")
	if e.ExitCode != 0 || !strings.Contains(e.Stdout, "data.csv") || !strings.Contains(e.Stdout, "report.txt") ||
		e.SessionID != sess.ID || e.Status != airlock.StatusCompleted {
		t.Fatalf("ls: %+v", e)
	}
	// Nothing but what the agent and its code wrote: no figure files.
	list, err := c.ListFiles(ctx, sess.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range list.Entries {
		names = append(names, f.Name)
	}
	if strings.Join(names, ",") != "data.csv,report.txt" {
		t.Errorf("workspace holds %v", names)
	}

	var out bytes.Buffer
	if n, err := c.GetFile(ctx, sess.ID, "report.txt", &out); err != nil || n != 9 || out.String() != "total 88\n" {
		t.Fatalf("download: %d %q %v", n, out.String(), err)
	}

	got, err := c.Session(ctx, sess.ID)
	if err != nil || got.Usage.Execs != 1 || got.Usage.CellRuns != 2 || got.Usage.BytesUploaded != int64(len(csv)) ||
		got.Usage.BytesDownload != 9 || got.Usage.PeakMemoryMB == 0 || got.State != airlock.SessionReady {
		t.Fatalf("usage: %+v %v", got, err)
	}
	// The exec is recorded with the session.
	if rec, err := c.Execution(ctx, e.ID); err != nil || rec.SessionID != sess.ID || rec.Language != airlock.Bash {
		t.Fatalf("recorded execution: %+v %v", rec, err)
	}

	final, err := c.DeleteSession(ctx, sess.ID)
	if err != nil || final.State != airlock.SessionDestroyed || final.EndReason != airlock.EndDeleted || final.EndedAt == nil {
		t.Fatalf("delete: %+v %v", final, err)
	}
	s.checkClean()
	_, err = c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "true"})
	wantProblem(t, "exec after delete", err, 409, "session-ended")
}

func hasOutput(r *airlock.CellResult, typ, sub string) bool {
	for _, o := range r.Outputs {
		if o.Type == typ && strings.Contains(o.Data, sub) {
			return true
		}
	}
	return false
}
