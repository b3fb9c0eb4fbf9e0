package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock"
)

func TestLanguageForFile(t *testing.T) {
	tests := []struct {
		file string
		want airlock.Language
		ok   bool
	}{
		{"a.py", airlock.Python, true},
		{"dir.d/script.sh", airlock.Bash, true},
		{"app.js", airlock.Node, true},
		{"mod.mjs", airlock.Node, true},
		{"q.sql", airlock.SQL, true},
		{"UPPER.PY", airlock.Python, true},
		{"a.tar.sh", airlock.Bash, true},
		{"notes.txt", "", false},
		{"Makefile", "", false},
		{"py", "", false},
		{".py", airlock.Python, true}, // a file named ".py" is still Python
		{"dir.py/file", "", false},
	}
	for _, tt := range tests {
		got, ok := languageForFile(tt.file)
		if got != tt.want || ok != tt.ok {
			t.Errorf("languageForFile(%q) = %q, %v; want %q, %v", tt.file, got, ok, tt.want, tt.ok)
		}
	}
}

func TestArtifactName(t *testing.T) {
	tests := []struct {
		filename string
		want     string // "" means refused
	}{
		{"plot.png", "plot.png"},
		{"out/plot.png", "plot.png"},
		{"/workspace/out/data.csv", "data.csv"},
		{"../../etc/passwd", "passwd"}, // only the base name is used
		{"dir/", "dir"},
		{".hidden", ".hidden"},
		{"a b.txt", "a b.txt"},
		{"résumé.pdf", "résumé.pdf"},
		{"", ""},
		{".", ""},
		{"..", ""},
		{"a/..", ""},
		{"/", ""},
		{"///", ""},
		{"x..y", ""},
		{`..\..\windows\evil`, ""},
		{`a\b`, ""},
		{"bad\x1b[2Jname", ""},
		{"new\nline", ""},
		{"nul\x00byte", ""},
		{"\xff\xfe", ""},
		{strings.Repeat("a", 256), ""},
		{strings.Repeat("a", 255), strings.Repeat("a", 255)},
	}
	for _, tt := range tests {
		got, err := artifactName(tt.filename)
		if tt.want == "" {
			if err == nil {
				t.Errorf("artifactName(%q) = %q, want refused", tt.filename, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("artifactName(%q) = %q, %v; want %q", tt.filename, got, err, tt.want)
		}
	}
}

func TestRunExitCode(t *testing.T) {
	tests := []struct {
		e    airlock.Execution
		want int
	}{
		{airlock.Execution{ExitCode: 0}, 0},
		{airlock.Execution{ExitCode: 3}, 3},
		{airlock.Execution{ExitCode: 255}, 255},
		{airlock.Execution{ExitCode: 256}, 255},
		{airlock.Execution{ExitCode: -1}, 255},
		{airlock.Execution{ExitCode: 0, TimedOut: true}, 124},
		{airlock.Execution{ExitCode: 137, TimedOut: true}, 137},
		{airlock.Execution{ExitCode: -9, TimedOut: true}, 124},
		{airlock.Execution{ExitCode: 0, OOMKilled: true}, 137},
		{airlock.Execution{ExitCode: 137, OOMKilled: true}, 137},
	}
	for _, tt := range tests {
		if got := runExitCode(&tt.e); got != tt.want {
			t.Errorf("runExitCode(exit %d, timed out %v, oom %v) = %d, want %d",
				tt.e.ExitCode, tt.e.TimedOut, tt.e.OOMKilled, got, tt.want)
		}
	}
}

// fakeServer mimics POST /v1/execute, GET /v1/executions and artifact
// downloads. The code sent picks the response.
type fakeServer struct {
	*httptest.Server
	executes atomic.Int64
	lastReq  atomic.Pointer[airlock.ExecuteRequest]
	lastAgnt atomic.Pointer[string]
}

const fakeKey = "alk_fake"

var fakeFiles = map[string][]byte{
	"data": []byte("a,b\n1,2\n"),
	"evil": []byte("overwritten"),
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func problem(w http.ResponseWriter, status int, slug, title, detail, code string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "urn:airlock:problem:" + slug,
		"title": title, "status": status, "detail": detail, "code": code})
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/execute", func(w http.ResponseWriter, r *http.Request) {
		f.executes.Add(1)
		if r.Header.Get("Authorization") != "Bearer "+fakeKey {
			problem(w, 401, "unauthorized", "Unauthorized", "missing or invalid API key", "unauthorized")
			return
		}
		var req airlock.ExecuteRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			problem(w, 400, "bad-json", "Bad Request", err.Error(), "invalid")
			return
		}
		f.lastReq.Store(&req)
		agent := r.Header.Get("X-Agent-Id")
		f.lastAgnt.Store(&agent)
		e := airlock.Execution{ID: "ex1", Language: req.Language, Status: airlock.StatusCompleted, Artifacts: []airlock.Artifact{}}
		switch strings.TrimSpace(req.Code) {
		case "ok":
			e.Stdout = "ok\n"
		case "special":
			e.Stdout, e.Stderr = "no newline\x00\xff", "warn: x"
			e.ExitCode, e.TimedOut, e.OOMKilled, e.StdoutTruncated = 3, true, true, true
			e.DurationMS, e.ArtifactsTruncated = 4600, true
		case "exit7":
			e.ExitCode = 7
		case "findings":
			e.Stdout = "ran\n"
			e.Findings = []airlock.GuardFinding{{Rule: "miner", Severity: "critical", Line: 2, Column: 5,
				Excerpt: "xmrig", Message: "runs the miner \x1b[2Jxmrig"}}
		case "failed":
			e.Status, e.Error = airlock.StatusFailed, "sandbox\x1b[2J lost"
		case "artifacts":
			e.Stdout = "made files\n"
			for _, a := range []struct{ name, file string }{
				{"out/data.csv", "data"},
				{"link.txt", "evil"},
				{"../up.txt", "data"},
				{"..", "data"},
				{"x/..", "data"},
				{"other/data.csv", "data"}, // same base name as the first
			} {
				b := fakeFiles[a.file]
				e.Artifacts = append(e.Artifacts, airlock.Artifact{ID: a.file, Filename: a.name,
					SizeBytes: int64(len(b)), SHA256: sha(b), URL: "/v1/artifacts/" + a.file})
			}
		case "badsum":
			e.Artifacts = []airlock.Artifact{{Filename: "bad.bin", SizeBytes: 4, SHA256: sha([]byte("nope")), URL: "/v1/artifacts/data"}}
		case "problem":
			problem(w, 400, "unknown-image", "Unknown image", `no image named "nope"`, "invalid")
			return
		case "ratelimit":
			problem(w, 429, "rate-limited", "Too Many Requests", "slow down", "rate_limited")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(e)
	})
	mux.HandleFunc("GET /v1/executions", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+fakeKey {
			problem(w, 401, "unauthorized", "Unauthorized", "missing or invalid API key", "unauthorized")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"executions":[]}`)
	})
	mux.HandleFunc("GET /v1/artifacts/{id}", func(w http.ResponseWriter, r *http.Request) {
		b, ok := fakeFiles[r.PathValue("id")]
		if !ok || r.Header.Get("Authorization") != "Bearer "+fakeKey {
			problem(w, 404, "not-found", "Not Found", "no such artifact", "not_found")
			return
		}
		w.Write(b)
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

// cliEnv isolates a test from the caller's AIRLOCK_* variables.
func cliEnv(t *testing.T) {
	t.Setenv(envStateDir, t.TempDir())
	t.Setenv(envURL, "")
	t.Setenv(envAPIKey, "")
	t.Setenv(envStore, "")
}

// runCLI runs a subcommand function with captured stdio and returns its
// stdout, stderr and exit status as main would produce it.
func runCLI(t *testing.T, fn func(context.Context, []string, stdio) error, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := fn(context.Background(), args, stdio{in: strings.NewReader(stdin), out: &out, err: &errb})
	code := exitStatus(err, []string{"MAIN"}, &errb)
	return out.String(), errb.String(), code
}

func TestRun(t *testing.T) {
	cliEnv(t)
	f := newFakeServer(t)
	dir := t.TempDir()
	prog := func(name, code string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := []string{"--url", f.URL, "--key", fakeKey}

	t.Run("ok", func(t *testing.T) {
		out, errs, code := runCLI(t, runRun, "", append(base, "--agent-id", "me", "--timeout", "9", "--image", "py-sci", prog("a.py", "ok"))...)
		if out != "ok\n" || errs != "" || code != 0 {
			t.Errorf("got %q %q %d", out, errs, code)
		}
		req := f.lastReq.Load()
		if req.Language != airlock.Python || req.Code != "ok" || req.TimeoutSec != 9 || req.Image != "py-sci" || *f.lastAgnt.Load() != "me" {
			t.Errorf("request %+v agent %q", req, *f.lastAgnt.Load())
		}
	})
	t.Run("stdin, flags after file, env key", func(t *testing.T) {
		t.Setenv(envAPIKey, fakeKey)
		t.Setenv(envURL, f.URL)
		out, _, code := runCLI(t, runRun, "ok", "-", "--language", "bash")
		if out != "ok\n" || code != 0 || f.lastReq.Load().Language != airlock.Bash {
			t.Errorf("got %q %d %+v", out, code, f.lastReq.Load())
		}
	})
	t.Run("key from state dir", func(t *testing.T) {
		os.WriteFile(filepath.Join(os.Getenv(envStateDir), "default.key"), []byte(fakeKey+"\n"), 0o600)
		defer os.Remove(filepath.Join(os.Getenv(envStateDir), "default.key"))
		if _, errs, code := runCLI(t, runRun, "", "--url", f.URL, prog("b.sh", "ok")); code != 0 {
			t.Errorf("exit %d: %s", code, errs)
		}
	})
	t.Run("special outcomes", func(t *testing.T) {
		out, errs, code := runCLI(t, runRun, "", append(base, prog("s.js", "special"))...)
		if out != "no newline\x00\uFFFD" { // JSON carries text: invalid UTF-8 arrives as U+FFFD
			t.Errorf("stdout %q", out)
		}
		want := "warn: x" + "airlock: output truncated\n" + "airlock: timed out after 5s\n" + "airlock: killed: out of memory\n" +
			"airlock: some artifacts were left out (over the limits)\n"
		if errs != want || code != 3 {
			t.Errorf("stderr %q exit %d; want %q exit 3", errs, code, want)
		}
	})
	t.Run("guard findings", func(t *testing.T) {
		out, errs, code := runCLI(t, runRun, "", append(base, prog("g.sh", "findings"))...)
		if out != "ran\n" || code != 0 || errs != "airlock: guard: miner (critical) at 2:5: runs the miner ?[2Jxmrig\n" {
			t.Errorf("got %q %q %d", out, errs, code)
		}
	})
	t.Run("program exit code", func(t *testing.T) {
		if _, _, code := runCLI(t, runRun, "", append(base, prog("e.sql", "exit7"))...); code != 7 {
			t.Errorf("exit %d, want 7", code)
		}
	})
	t.Run("server failed the run", func(t *testing.T) {
		_, errs, code := runCLI(t, runRun, "", append(base, prog("f.py", "failed"))...)
		if code != 125 || !strings.Contains(errs, "airlock: the server failed the run: sandbox?[2J lost") {
			t.Errorf("exit %d stderr %q", code, errs)
		}
	})
	t.Run("problem", func(t *testing.T) {
		out, errs, code := runCLI(t, runRun, "", append(base, prog("p.py", "problem"))...)
		if out != "" || code != 125 || errs != "airlock: Unknown image: no image named \"nope\" (HTTP 400)\n" {
			t.Errorf("got %q %q %d", out, errs, code)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		_, errs, code := runCLI(t, runRun, "", "--url", f.URL, "--key", "alk_wrong", prog("w.py", "ok"))
		if code != 125 || !strings.Contains(errs, "Unauthorized: missing or invalid API key (HTTP 401)") {
			t.Errorf("exit %d stderr %q", code, errs)
		}
	})
	t.Run("no server", func(t *testing.T) {
		_, errs, code := runCLI(t, runRun, "", "--url", "http://127.0.0.1:1", prog("n.py", "ok"))
		if code != 125 || !strings.Contains(errs, "cannot reach the server at http://127.0.0.1:1") {
			t.Errorf("exit %d stderr %q", code, errs)
		}
	})
	t.Run("usage errors exit 2, other failures before the run 125", func(t *testing.T) {
		before := f.executes.Load()
		for _, tt := range []struct {
			args []string
			code int
		}{
			{[]string{}, 2},
			{[]string{prog("x.txt", "ok")}, 2},
			{[]string{"-"}, 2},
			{[]string{"-l", "cobol", "-"}, 2},
			{[]string{"--timeout", "-1", prog("t.py", "ok")}, 2},
			{[]string{"--no-such-flag", prog("t.py", "ok")}, 2},
			{[]string{"a.py", "b.py"}, 2},
			{[]string{filepath.Join(dir, "missing.py")}, 125},
			{[]string{"--url", "ftp://x", prog("t.py", "ok")}, 125},
		} {
			if _, errs, code := runCLI(t, runRun, "", tt.args...); code != tt.code || errs == "" {
				t.Errorf("%q: exit %d stderr %q, want %d and a message", tt.args, code, errs, tt.code)
			}
		}
		if f.executes.Load() != before {
			t.Error("a usage error reached the server")
		}
	})
	t.Run("code too large", func(t *testing.T) {
		_, errs, code := runCLI(t, runRun, strings.Repeat("x", airlock.MaxCodeBytes+1), append(base, "-l", "python", "-")...)
		if code != 125 || !strings.Contains(errs, "limit") {
			t.Errorf("exit %d stderr %q", code, errs)
		}
	})
	t.Run("help", func(t *testing.T) {
		_, errs, code := runCLI(t, runRun, "", "-h")
		if code != 0 || !strings.Contains(errs, "125  airlock itself failed") {
			t.Errorf("exit %d stderr %q", code, errs)
		}
	})
}

func TestRunArtifacts(t *testing.T) {
	cliEnv(t)
	f := newFakeServer(t)
	work := t.TempDir()
	outDir := filepath.Join(work, "out", "nested")
	outside := filepath.Join(work, "outside.txt")
	if err := os.WriteFile(outside, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A symlink planted at an artifact's name must be replaced, not followed.
	if err := os.Symlink(outside, filepath.Join(outDir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(work, "a.py")
	os.WriteFile(prog, []byte("artifacts"), 0o644)

	out, errs, code := runCLI(t, runRun, "", "--url", f.URL, "--key", fakeKey, "--out", outDir, prog)
	if out != "made files\n" {
		t.Errorf("stdout %q", out)
	}
	if code != 125 {
		t.Errorf("exit %d, want 125 (some artifacts were refused)", code)
	}
	for _, want := range []string{
		"airlock: saved " + filepath.Join(outDir, "data.csv") + " (8 bytes)\n",
		"airlock: saved " + filepath.Join(outDir, "link.txt") + " (11 bytes)\n",
		"airlock: saved " + filepath.Join(outDir, "up.txt") + " (8 bytes)\n",
		`airlock: refused artifact ".."`,
		`airlock: refused artifact "x/.."`,
		`airlock: refused artifact "other/data.csv": another artifact was already saved as data.csv`,
		"airlock: 3 of 6 artifacts not saved\n",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "precious" {
		t.Errorf("file outside --out was overwritten: %q", b)
	}
	fi, err := os.Lstat(filepath.Join(outDir, "link.txt"))
	if err != nil || fi.Mode().Type() != 0 || fi.Mode().Perm() != 0o644 {
		t.Errorf("link.txt: %v %v, want a regular 0644 file", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(filepath.Join(outDir, "data.csv")); string(b) != string(fakeFiles["data"]) {
		t.Errorf("data.csv = %q", b)
	}
	entries, _ := os.ReadDir(outDir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "data.csv,link.txt,up.txt" {
		t.Errorf("--out holds %q (no temporary files should remain)", names)
	}

	t.Run("checksum mismatch leaves nothing", func(t *testing.T) {
		dir2 := filepath.Join(work, "out2")
		os.WriteFile(prog, []byte("badsum"), 0o644)
		_, errs, code := runCLI(t, runRun, "", "--url", f.URL, "--key", fakeKey, "--out", dir2, prog)
		if code != 125 || !strings.Contains(errs, `artifact "bad.bin" not saved`) {
			t.Errorf("exit %d stderr %q", code, errs)
		}
		if fi, err := os.Stat(dir2); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("out dir: %v %v, want 0755", fi, err)
		}
		if entries, _ := os.ReadDir(dir2); len(entries) != 0 {
			t.Errorf("out dir not empty: %v", entries)
		}
	})
}
