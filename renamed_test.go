package airlock_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// A response with a renamed field carries both names with one value for
// one release, and an answer of an earlier server (the old name only)
// still reads.
func TestRenamedFieldsSentUnderBothNames(t *testing.T) {
	at := time.Date(2026, 12, 2, 1, 2, 3, 0, time.UTC)
	cases := []struct {
		v    any
		want map[string]any
	}{
		{airlock.Execution{PeakMemoryMB: 12}, map[string]any{"peak_memory_mib": 12.0, "peak_memory_mb": 12.0}},
		{airlock.Artifact{ID: "a1"}, map[string]any{"artifact_id": "a1", "id": "a1"}},
		{airlock.FileEntry{Size: 7, ModTime: at}, map[string]any{"size_bytes": 7.0, "size": 7.0, "modified_at": "2026-12-02T01:02:03Z", "mtime": "2026-12-02T01:02:03Z"}},
		{airlock.EgressEvent{Time: at, BytesUp: 1, BytesDown: 2}, map[string]any{"occurred_at": "2026-12-02T01:02:03Z", "time": "2026-12-02T01:02:03Z", "up_bytes": 1.0, "bytes_up": 1.0, "down_bytes": 2.0, "bytes_down": 2.0}},
		{airlock.Snapshot{Bytes: 9}, map[string]any{"size_bytes": 9.0, "bytes": 9.0}},
		{&airlock.Usage{At: at}, map[string]any{"measured_at": "2026-12-02T01:02:03Z", "at": "2026-12-02T01:02:03Z"}},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%T: %s = %v, want %v (%s)", c.v, k, got[k], v, b)
			}
		}
	}

	var e airlock.Execution
	if err := json.Unmarshal([]byte(`{"peak_memory_mb": 5, "exit_code": 3}`), &e); err != nil || e.PeakMemoryMB != 5 || e.ExitCode != 3 {
		t.Errorf("old answer read as %+v, %v", e, err)
	}
	if err := json.Unmarshal([]byte(`{"peak_memory_mb": 5, "peak_memory_mib": 6}`), &e); err != nil || e.PeakMemoryMB != 6 {
		t.Errorf("both names: read %d, want the new name's 6 (%v)", e.PeakMemoryMB, err)
	}
	var list []airlock.Artifact
	if err := json.Unmarshal([]byte(`[{"id":"x","filename":"f"}]`), &list); err != nil || list[0].ID != "x" || list[0].Filename != "f" {
		t.Errorf("old artifact read as %+v, %v", list, err)
	}
}

func TestRenameOldFields(t *testing.T) {
	cases := []struct {
		in, want, problem string
	}{
		{`{"code":"x","timeout_sec":5}`, `"timeout_s":5`, ""},
		{`{"code":"x","timeout_s":5}`, `"timeout_s":5`, ""},
		{`{"timeout_sec":5,"timeout_s":5.0}`, `"timeout_s":5`, ""},
		{`{"timeout_sec":5,"timeout_s":6}`, "", airlock.ProblemConflictingFields},
		{`[1]`, `[1]`, ""},
	}
	for _, c := range cases {
		out, err := airlock.RenameOldFields("ExecuteRequest", []byte(c.in))
		var ae *airlock.Error
		switch {
		case c.problem != "":
			if !errors.As(err, &ae) || ae.Type != c.problem || ae.Code != airlock.EINVALID {
				t.Errorf("%s: err %v, want problem %s", c.in, err, c.problem)
			}
		case err != nil:
			t.Errorf("%s: %v", c.in, err)
		case !strings.Contains(string(out), c.want) || strings.Contains(string(out), "timeout_sec"):
			t.Errorf("%s became %s, want %s and no timeout_sec", c.in, out, c.want)
		}
	}
	if out, _ := airlock.RenameOldFields("CreateSessionRequest", []byte(`{"timeout_sec":5}`)); string(out) != `{"timeout_sec":5}` {
		t.Errorf("a schema without renames was changed: %s", out)
	}
}

// docs/api-deprecations.md lists every renamed field and when it goes.
func TestDeprecationsDoc(t *testing.T) {
	b, err := os.ReadFile("docs/api-deprecations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, f := range airlock.RenamedFields {
		row := "| `" + f.Schema + "` | `" + f.Old + "` | `" + f.New + "` |"
		if !strings.Contains(doc, row) {
			t.Errorf("docs/api-deprecations.md has no row %s", row)
		}
	}
	if !strings.Contains(doc, "API "+airlock.RemovedIn) || !strings.Contains(doc, airlock.RenamedIn) {
		t.Errorf("docs/api-deprecations.md does not say %s and %s", airlock.RenamedIn, airlock.RemovedIn)
	}
}
