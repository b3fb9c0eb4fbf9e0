package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testenv"
)

// The quickstart is the part of README.md (and of the docs pages in
// quickstartDocs) a new user runs as written. Its shell blocks are fenced as ```sh
// quickstart (run in order, each in its own bash) and ```sh quickstart-env
// (the variables the user sets once: this test sets them itself, to the
// airlockd it started). Every file in examples/ must be run by one of the
// blocks, and every block must meet exactly one expectation below, so a
// block added to the README without a check fails here.

// quickstartDocs are the files whose quickstart blocks run, in order.
var quickstartDocs = []string{"README.md", "docs/getting-started.md", "docs/sessions.md", "docs/mcp.md", "docs/tenants-and-keys.md", "docs/api.md"}

// quickstartEnv are the variables a quickstart-env block may set: the
// test sets each to its own airlockd's.
var quickstartEnv = map[string]bool{"AIRLOCK_URL": true, "AIRLOCK_API_KEY": true, "AIRLOCK_ADMIN_KEY": true}

// fence matches a fenced block and its info string.
var fence = regexp.MustCompile("(?ms)^```([^\n`]*)\n(.*?)^```[ \t]*$")

// mdBlock is a fenced block of a Markdown file.
type mdBlock struct {
	file, info, body string
	line             int
}

// fencedBlocks returns the fenced blocks of a Markdown text.
func fencedBlocks(file, text string) []mdBlock {
	var out []mdBlock
	for _, m := range fence.FindAllStringSubmatchIndex(text, -1) {
		out = append(out, mdBlock{
			file: file,
			info: strings.TrimSpace(text[m[2]:m[3]]),
			body: text[m[4]:m[5]],
			line: strings.Count(text[:m[0]], "\n") + 1,
		})
	}
	return out
}

// repoRoot is the module's root directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// quickstartCheck is what one block's run must show.
type quickstartCheck struct {
	// runs is a piece of the block's text that picks this check.
	runs string
	// check inspects the block's output (stdout and stderr), the
	// directory it ran in and the airlockd it ran against.
	check func(out string, r *quickstartRun) error
}

// quickstartRun is where the blocks ran.
type quickstartRun struct {
	dir string         // the working directory
	c   *client.Client // the default tenant's client of the airlockd
}

func contains(want ...string) func(out string, r *quickstartRun) error {
	return func(out string, _ *quickstartRun) error {
		for _, w := range want {
			if !strings.Contains(out, w) {
				return fmt.Errorf("the output lacks %q", w)
			}
		}
		return nil
	}
}

func isPNG(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		return fmt.Errorf("%s is not a PNG (%d bytes)", path, len(b))
	}
	return nil
}

var quickstartChecks = []quickstartCheck{
	{runs: `"print(6 * 7)"`, check: func(out string, _ *quickstartRun) error {
		var e struct {
			Status   string `json:"status"`
			ExitCode *int   `json:"exit_code"`
			Stdout   string `json:"stdout"`
		}
		if err := json.Unmarshal([]byte(out), &e); err != nil {
			return fmt.Errorf("the answer is not an execution: %v", err)
		}
		if e.Status != "completed" || e.ExitCode == nil || *e.ExitCode != 0 || e.Stdout != "42\n" {
			return fmt.Errorf("status %q, exit code %v, stdout %q; want completed, 0, \"42\\n\"", e.Status, e.ExitCode, e.Stdout)
		}
		return nil
	}},
	{runs: "airlock run examples/chart.py", check: func(out string, r *quickstartRun) error {
		if err := contains("saved output.png", "output.png\n",
			"hello from sandbox:/workspace as uid 1000", "data.csv has 2 lines", "the root file system is read-only",
			"the first ten primes: 2 3 5 7 11 13 17 19 23 29")(out, r); err != nil {
			return err
		}
		return isPNG(filepath.Join(r.dir, "out", "output.png"))
	}},
	{runs: "node hello.mjs", check: func(out string, r *quickstartRun) error {
		if err := contains("hi from /home/user", "10! = 3628800")(out, r); err != nil {
			return err
		}
		// The SDK's command is an execution of this airlockd's tenant:
		// the SDK talked to it, not to anything else.
		page, err := r.c.ListExecutions(context.Background(), 20, "")
		if err != nil {
			return err
		}
		for _, e := range page.Executions { // a listing carries no output
			full, err := r.c.Execution(context.Background(), e.ID)
			if err != nil {
				return err
			}
			if full.Stdout == "hi from /home/user\n" {
				return nil
			}
		}
		return fmt.Errorf("no execution of the default tenant printed the SDK's command output")
	}},
	{runs: "airlock session create", check: func(out string, r *quickstartRun) error {
		if err := contains("saved output.png")(out, r); err != nil {
			return err
		}
		return isPNG(filepath.Join(r.dir, "session-output.png"))
	}},
	{runs: "/contexts/$C/run", check: contains("3 data.csv", "done", `"exit_code":0`, "image/png", "count")},
	{runs: "/mcp", check: contains("42")},
	{runs: `plt.savefig(\"output.png\")`, check: contains(`"exit_code":0`, `"filename":"output.png"`, `"content_type":"image/png"`)},
	{runs: "airlock admin tenant create acme", check: contains("acme key after revoke: 401")},
}

// TestQuickstart runs the quickstart of README.md and the docs pages in
// quickstartDocs, as written, against a real airlockd: curl, the
// CLI on the files in examples/, and E2B's JavaScript SDK (installed by
// npm ci from examples/e2b's lockfile), with only the environment
// variables the README tells the user to set. After airlockd stops,
// nothing of a sandbox is left on the host.
func TestQuickstart(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.Image(t, "python-ds")
	node, _ := requireNode(t)
	root := repoRoot(t)

	var blocks []mdBlock
	readmeEnv := 0
	for _, f := range quickstartDocs {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, blk := range fencedBlocks(f, string(b)) {
			switch blk.info {
			case "sh quickstart":
				blocks = append(blocks, blk)
			case "sh quickstart-env":
				if f == "README.md" {
					readmeEnv++
				}
				checkEnvBlock(t, blk)
			}
		}
	}
	if readmeEnv != 1 {
		t.Errorf("README.md should set the quickstart's variables in one quickstart-env block; found %d", readmeEnv)
	}
	if len(blocks) == 0 {
		t.Fatal("no quickstart blocks in " + strings.Join(quickstartDocs, ", "))
	}
	checks := matchChecks(t, blocks)
	checkExamplesRun(t, root, blocks)
	if t.Failed() {
		return
	}

	n := newTestNode(t, nodeOptions{name: "quickstart", images: []string{"base", "python-ds"}})
	work := filepath.Join(n.dir, "work")
	copyExamples(t, filepath.Join(root, "examples"), filepath.Join(work, "examples"))
	if err := os.MkdirAll(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	buildCLI(t, filepath.Join(work, "bin"))
	d := n.start(append(quiet, "--keep-sessions=false")...)
	run := &quickstartRun{dir: work, c: newClient(t, d.url, n.key())}
	admin, err := os.ReadFile(filepath.Join(n.dir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "AIRLOCK_URL="+d.url, "AIRLOCK_API_KEY="+n.key(),
		"AIRLOCK_ADMIN_KEY="+strings.TrimSpace(string(admin)),
		"PATH="+filepath.Dir(node)+":"+os.Getenv("PATH"))

	for i, blk := range blocks {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", blk.body)
		cmd.Dir, cmd.Env = work, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err := cmd.Run()
		cancel()
		t.Logf("%s:%d (%v):\n%s\n%s", blk.file, blk.line, time.Since(start).Round(time.Millisecond), blk.body, out.String())
		if err != nil {
			t.Errorf("%s:%d: the block failed: %v", blk.file, blk.line, err)
			continue
		}
		if err := checks[i].check(out.String(), run); err != nil {
			t.Errorf("%s:%d: %v", blk.file, blk.line, err)
		}
	}

	d.stop(t)
	if after := observe(t, n.runsc, n.dir, n.parent, 0); !after.empty() {
		t.Errorf("left after a clean stop: %s", after)
	}
}

// checkEnvBlock makes sure the block sets nothing but the variables the
// test gives values of its own.
func checkEnvBlock(t *testing.T, blk mdBlock) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(blk.body), "\n") {
		name, _, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !strings.HasPrefix(line, "export ") || !ok || !quickstartEnv[name] {
			t.Errorf("%s:%d: a quickstart-env block may only export %v; it has %q", blk.file, blk.line, keys(quickstartEnv), line)
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// matchChecks pairs every block with the one check that names it, and
// every check with a block.
func matchChecks(t *testing.T, blocks []mdBlock) []quickstartCheck {
	t.Helper()
	out := make([]quickstartCheck, len(blocks))
	used := make([]bool, len(quickstartChecks))
	for i, blk := range blocks {
		found := 0
		for j, c := range quickstartChecks {
			if strings.Contains(blk.body, c.runs) {
				out[i], used[j] = c, true
				found++
			}
		}
		if found != 1 {
			t.Errorf("%s:%d: a quickstart block must meet exactly one check of TestQuickstart; this one meets %d:\n%s", blk.file, blk.line, found, blk.body)
		}
	}
	for j, c := range quickstartChecks {
		if !used[j] {
			t.Errorf("no quickstart block runs %q any more: update TestQuickstart's checks", c.runs)
		}
	}
	return out
}

// checkExamplesRun fails for a file in examples/ that no quickstart block
// runs (package files and lockfiles aside).
func checkExamplesRun(t *testing.T, root string, blocks []mdBlock) {
	t.Helper()
	var all strings.Builder
	for _, b := range blocks {
		all.WriteString(b.body)
	}
	err := filepath.WalkDir(filepath.Join(root, "examples"), func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() {
			if de.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(de.Name(), "package") && strings.HasSuffix(de.Name(), ".json") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if !strings.Contains(all.String(), rel) && !strings.Contains(all.String(), de.Name()) {
			t.Errorf("%s is run by no quickstart block", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// copyExamples copies examples/ (without node_modules) to dst.
func copyExamples(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if de.IsDir() {
			if de.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
