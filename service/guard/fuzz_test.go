package guard_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/guard"
)

// Fuzz targets, one per language: on any input the guard ends, does not
// panic (a parser's panic is turned into a finding, which fails here),
// and every finding is well formed and inside the code. Seeds: the rule
// cases and testdata/fuzz/<target>.

func fuzzLanguage(f *testing.F, lang airlock.Language) {
	for _, tt := range ruleCases {
		if tt.lang == lang {
			f.Add(tt.code)
		}
	}
	g, err := guard.New(guard.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, code string) {
		fs := check(g, context.Background(), lang, code)
		lines := strings.Count(code, "\n") + 1
		if len(fs) > 51 {
			t.Fatalf("%d findings, more than the bound", len(fs))
		}
		for _, fd := range fs {
			if strings.Contains(fd.Message, "parser failed") {
				t.Fatalf("a parser panicked: %v", fd)
			}
			if fd.Rule == guard.RuleTimeout {
				t.Fatalf("the check timed out on %d bytes", len(code))
			}
			if _, ok := guard.Severity[fd.Rule]; !ok || fd.Severity != guard.Severity[fd.Rule] {
				t.Fatalf("unknown rule or wrong severity: %+v", fd)
			}
			if fd.Line < 1 || fd.Line > lines || fd.Column < 1 || fd.Column > len(code)+1 {
				t.Fatalf("finding outside the code (%d lines, %d bytes): %+v", lines, len(code), fd)
			}
			if len(fd.Excerpt) > airlock.MaxExcerptBytes || !utf8.ValidString(fd.Excerpt) {
				t.Fatalf("bad excerpt %q", fd.Excerpt)
			}
		}
	})
}

func FuzzShell(f *testing.F)      { fuzzLanguage(f, airlock.Bash) }
func FuzzPython(f *testing.F)     { fuzzLanguage(f, airlock.Python) }
func FuzzJavaScript(f *testing.F) { fuzzLanguage(f, airlock.Node) }
func FuzzSQL(f *testing.F)        { fuzzLanguage(f, airlock.SQL) }
func FuzzCommand(f *testing.F)    { fuzzLanguage(f, airlock.Command) }
