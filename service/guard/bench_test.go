package guard_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/guard"
)

// The README's chart example, and a program of the same size in each of
// the other languages.
var chartExample = map[airlock.Language]string{
	airlock.Python: "import matplotlib.pyplot as plt\nplt.figure(figsize=(6,3))\nplt.plot([1,2,3,4],[10,25,18,35],color=\"#3b82f6\")\nplt.title(\"Agent Performance\")\nplt.savefig(\"output.png\")",
	airlock.Bash:   "set -e\nfor f in data/*.csv; do\n  wc -l \"$f\" | sort -n >> counts.txt\ndone\ncurl -s -o out.json \"$URL\" && jq '.items[] | .name' out.json | head\n",
	airlock.Node:   "const fs = require('fs');\nconst rows = [[1, 10], [2, 25], [3, 18], [4, 35]];\nconst svg = rows.map(([x, y]) => `<rect x=\"${x * 20}\" height=\"${y}\"/>`).join('');\nfs.writeFileSync('output.svg', `<svg>${svg}</svg>`);\n",
	airlock.SQL:    ".headers on\nCREATE TABLE perf(step INTEGER, score REAL);\nINSERT INTO perf VALUES (1, 10), (2, 25), (3, 18), (4, 35);\nSELECT step, score, avg(score) OVER () AS mean FROM perf ORDER BY step;\n",
}

// megabyte repeats typical code of the language to about 1 MB.
func megabyte(lang airlock.Language) string {
	unit := map[airlock.Language]string{
		airlock.Python: "def f%d(xs, k=3):\n    total = sum(x * k for x in xs if x %% 2)\n    print(f\"{total=}\", os.path.join('a', 'b'))\n    return subprocess.run(['ls', '-l'], capture_output=True)\n\n",
		airlock.Bash:   "f%d() {\n  for x in \"$@\"; do echo \"$x\" | tr a-z A-Z >> out.txt; done\n  [ -f out.txt ] && wc -l < out.txt\n}\n",
		airlock.Node:   "function f%d(xs) {\n  const t = xs.filter(x => x %% 2).map(x => x * 3).reduce((a, b) => a + b, 0);\n  console.log(`total ${t}`);\n  return require('path').join('a', String(t));\n}\n",
		airlock.SQL:    "INSERT INTO t%d VALUES (1, 'a;b', \"c\"), (2, 'it''s', NULL); -- note\nSELECT count(*) FROM t WHERE name LIKE 'a%%' GROUP BY step;\n",
	}[lang]
	var b strings.Builder
	for i := 0; b.Len() < 1<<20-512; i++ {
		fmt.Fprintf(&b, unit, i)
	}
	return b.String()
}

// BenchmarkCheck times one check per language on the chart example and
// on a 1 MB file, and reports the p50 and p99 of the checks it ran.
func BenchmarkCheck(b *testing.B) {
	g, err := guard.New(guard.Config{Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	for _, lang := range []airlock.Language{airlock.Bash, airlock.Python, airlock.Node, airlock.SQL} {
		if lang == airlock.Python && !guard.PythonParser {
			continue
		}
		for _, input := range []struct {
			name, code string
		}{{"chart", chartExample[lang]}, {"1MB", megabyte(lang)}} {
			b.Run(string(lang)+"/"+input.name, func(b *testing.B) {
				ctx := context.Background()
				b.SetBytes(int64(len(input.code)))
				times := make([]time.Duration, 0, b.N)
				for b.Loop() {
					t := time.Now()
					fs := g.Check(ctx, lang, input.code)
					times = append(times, time.Since(t))
					if slices.ContainsFunc(fs, func(f airlock.GuardFinding) bool { return f.Blocks() }) {
						b.Fatalf("findings in benign code: %v", fs)
					}
				}
				report(b, times)
			})
		}
	}
}

// BenchmarkPythonASTInSandbox measures the alternative to the Go parser
// that doc.go weighs: CPython's own ast module run in the sandbox before
// the program (a session exec of python3 -c 'import ast; ...'), next to
// an exec of true, on the chart example and on the 1 MB file.
func BenchmarkPythonASTInSandbox(b *testing.B) {
	s := teststack.New(b, teststack.Options{})
	tn := s.NewTenant(b, "bench")
	ctx := context.Background()
	sess, _, err := tn.Client.CreateSession(ctx, airlock.CreateSessionRequest{Image: "python-ds", Size: airlock.SizeSmall})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tn.Client.DeleteSession(context.Background(), sess.ID) })
	mb := megabyte(airlock.Python)
	if _, err := tn.Client.PutFile(ctx, sess.ID, "/workspace/mb.py", strings.NewReader(mb), int64(len(mb))); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, shell, stdin string }{
		{"true", "true", ""},
		{"ast/chart", "python3 -c 'import ast, sys; ast.parse(sys.stdin.read())'", chartExample[airlock.Python]},
		{"ast/1MB", "python3 -c 'import ast; ast.parse(open(\"/workspace/mb.py\").read())'", ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			var times []time.Duration
			for b.Loop() {
				t := time.Now()
				e, err := tn.Client.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: c.shell, Stdin: c.stdin})
				if err != nil || e.ExitCode != 0 {
					b.Fatalf("%v %+v", err, e)
				}
				times = append(times, time.Since(t))
			}
			report(b, times)
		})
	}
}

// report adds the p50 and p99 (nearest rank) of times to a benchmark.
func report(b *testing.B, times []time.Duration) {
	slices.Sort(times)
	pct := func(p float64) float64 {
		i := int(p*float64(len(times))+0.5) - 1
		return float64(times[max(0, min(i, len(times)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
