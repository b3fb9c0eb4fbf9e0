package e2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// TestExecutionsRecorded checks that every run is recorded for its tenant
// only, newest first, with what was asked and what came out.
func TestExecutionsRecorded(t *testing.T) {
	s := newStack(t, cold)
	ctx := context.Background()
	runs := []struct {
		agent string
		req   airlock.ExecuteRequest
		exit  int
	}{
		{"planner-1", airlock.ExecuteRequest{Language: airlock.Python, Code: "print('first')"}, 0},
		{"", airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo second; exit 2"}, 2},
		{"coder 2", airlock.ExecuteRequest{Language: airlock.SQL, Code: "select 40 + 2 as answer;"}, 0},
	}
	var ids []string
	for _, r := range runs {
		var opts []client.ExecuteOption
		if r.agent != "" {
			opts = append(opts, client.WithAgentID(r.agent))
		}
		e := s.execute(t, r.req, opts...)
		wantResult(t, e, r.exit, false, false)
		ids = append(ids, e.ID)
	}
	eb, err := s.b.client.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo tenant b"})
	if err != nil {
		t.Fatal(err)
	}

	// A's list: its three, newest first, none of B's.
	p, err := s.a.client.ListExecutions(ctx, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range p.Executions {
		got = append(got, e.ID)
	}
	want := []string{ids[2], ids[1], ids[0]}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("tenant A lists %v, want newest first %v (tenant B ran %s)", got, want, eb.ID)
	}
	for i := 1; i < len(p.Executions); i++ {
		if p.Executions[i].CreatedAt.After(p.Executions[i-1].CreatedAt) {
			t.Errorf("execution %d created %v after the one before it (%v)", i, p.Executions[i].CreatedAt, p.Executions[i-1].CreatedAt)
		}
	}
	// Paging: two, then the rest by cursor.
	p1, err := s.a.client.ListExecutions(ctx, 2, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(p1.Executions) != 2 || p1.NextCursor == "" {
		t.Fatalf("first page: %d executions, cursor %q", len(p1.Executions), p1.NextCursor)
	}
	p2, err := s.a.client.ListExecutions(ctx, 2, p1.NextCursor)
	if err != nil {
		t.Fatal(err)
	}
	if len(p2.Executions) != 1 || p2.Executions[0].ID != ids[0] || p2.NextCursor != "" {
		t.Errorf("second page: %+v, want only %s and no cursor", p2, ids[0])
	}

	// B's list: only its own.
	pb, err := s.b.client.ListExecutions(ctx, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(pb.Executions) != 1 || pb.Executions[0].ID != eb.ID || pb.Executions[0].TenantID != s.b.tenant.ID {
		t.Errorf("tenant B lists %d executions, want only %s", len(pb.Executions), eb.ID)
	}

	// One execution in full.
	for i, r := range runs {
		e, err := s.a.client.Execution(ctx, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(r.req.Code))
		if e.CodeSHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: code_sha256 %s, want %x", ids[i], e.CodeSHA256, sum)
		}
		if e.AgentID != r.agent || e.Language != r.req.Language || e.ExitCode != r.exit ||
			e.Status != airlock.StatusCompleted || e.TenantID != s.a.tenant.ID {
			t.Errorf("%s: agent %q language %q exit %d status %q tenant %q; want %q %q %d completed %q",
				ids[i], e.AgentID, e.Language, e.ExitCode, e.Status, e.TenantID, r.agent, r.req.Language, r.exit, s.a.tenant.ID)
		}
		if e.FinishedAt == nil || e.FinishedAt.Before(e.CreatedAt) || e.Image == "" {
			t.Errorf("%s: created %v finished %v image %q", ids[i], e.CreatedAt, e.FinishedAt, e.Image)
		}
	}
	if e, err := s.a.client.Execution(ctx, ids[2]); err == nil && e.Stdout == "" {
		t.Errorf("stdout of the sql run was not recorded")
	}
	// Neither tenant sees the other's record.
	s.do(t, http.MethodGet, "/v1/executions/"+eb.ID, s.a.key, nil, nil).problem(t, http.StatusNotFound)
	s.do(t, http.MethodGet, "/v1/executions/"+ids[0], s.b.key, nil, nil).problem(t, http.StatusNotFound)
	s.waitClean(t, "after the executions")
}
