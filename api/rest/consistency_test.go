package rest_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/internal/problem"
)

// The API's naming rules, checked over every property of openapi.json
// (docs/api-deprecations.md states them):
//
//   - a duration ends in its unit, _s or _ms; no other spelling (_sec,
//     _secs, _seconds, _msec) and no duration without one;
//   - a size (an integer named for bytes, size, memory or disk) ends in
//     _bytes or _mib; _mb (MB or MiB?) is refused;
//   - an instant (format date-time) is named *_at, and *_at is an instant;
//   - an identifier is <thing>_id, never a bare id.
//
// A property marked deprecated is an old name kept for one release and
// must be in airlock.RenamedFields; a schema marked x-compat mirrors
// another API's wire format (the reference blueprint's /execute) and is
// held to that format instead.
func TestOpenAPINamingRules(t *testing.T) {
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range namingViolations(t, raw) {
		t.Error(v)
	}
}

var (
	durationWord = regexp.MustCompile(`(^|_)(timeout|duration|ttl|lifetime|interval|delay|elapsed|retry_after|age|wait)(_|$)`)
	durationUnit = regexp.MustCompile(`_(s|ms)$`)
	otherTime    = regexp.MustCompile(`_(sec|secs|second|seconds|msec|msecs|millis|milliseconds|us|ns|min|mins|minutes|h|hours)$`)
	sizeWord     = regexp.MustCompile(`(^|_)(size|bytes|memory|mem|disk)(_|$)`)
	sizeUnit     = regexp.MustCompile(`_(bytes|mib)$`)
	badSizeUnit  = regexp.MustCompile(`_(mb|kb|gb|kib|gib|b)$`)
)

type propSchema struct {
	Type       any    `json:"type"`
	Format     string `json:"format"`
	Deprecated bool   `json:"deprecated"`
	Ref        string `json:"$ref"`
}

func (p propSchema) is(kind string) bool {
	switch t := p.Type.(type) {
	case string:
		return t == kind
	case []any:
		for _, x := range t {
			if x == kind {
				return true
			}
		}
	}
	return false
}

// namingViolations walks every "properties" object of the document.
func namingViolations(t *testing.T, raw []byte) []string {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	// Deprecated members that were not renamed: the problem document's
	// code, which status says already (docs/api-deprecations.md).
	renamed := map[string]bool{"Problem.code": true, "ProblemTypeEntry.code": true}
	for _, f := range airlock.RenamedFields {
		renamed[f.Schema+"."+f.Old] = true
	}
	var out []string
	var walk func(v any, where, schema string)
	walk = func(v any, where, schema string) {
		switch v := v.(type) {
		case []any:
			for i, x := range v {
				walk(x, fmt.Sprintf("%s/%d", where, i), schema)
			}
		case map[string]any:
			if _, compat := v["x-compat"]; compat {
				return
			}
			if props, ok := v["properties"].(map[string]any); ok {
				for name, p := range props {
					b, _ := json.Marshal(p)
					var ps propSchema
					json.Unmarshal(b, &ps)
					at := where + "/properties/" + name
					if ps.Deprecated {
						if !renamed[schema+"."+name] {
							out = append(out, fmt.Sprintf("%s: deprecated, but not an old name in airlock.RenamedFields", at))
						}
						continue
					}
					if fixedNames[schema+"."+name] {
						continue
					}
					out = append(out, checkName(at, name, ps)...)
				}
			}
			for k, x := range v {
				s := schema
				if strings.HasSuffix(where, "/schemas") {
					s = k
				}
				walk(x, where+"/"+k, s)
			}
		}
	}
	walk(doc, "", "")
	slices.Sort(out)
	return out
}

// fixedNames are members whose names an issue fixed for clients ("The
// shape" of issue 25: a metrics sample's instant is at).
var fixedNames = map[string]bool{"MetricSample.at": true}

func checkName(at, name string, p propSchema) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, at+": "+fmt.Sprintf(format, args...)) }
	numeric := p.is("integer") || p.is("number")
	switch {
	case otherTime.MatchString(name):
		bad("a duration's unit is _s or _ms (one spelling for the whole API)")
	case durationWord.MatchString(name) && numeric && !durationUnit.MatchString(name):
		bad("a duration without its unit (_s or _ms)")
	}
	if numeric && !durationWord.MatchString(name) {
		switch {
		case badSizeUnit.MatchString(name):
			bad("a size's unit is _bytes or _mib")
		case sizeWord.MatchString(name) && !sizeUnit.MatchString(name):
			bad("a size without its unit (_bytes or _mib)")
		}
	}
	if p.Format == "date-time" && !strings.HasSuffix(name, "_at") {
		bad("an instant is named *_at")
	}
	if strings.HasSuffix(name, "_at") && p.Ref == "" && p.Format != "date-time" {
		bad("*_at names an instant (type string, format date-time)")
	}
	if name == "id" {
		bad("an identifier is <thing>_id")
	}
	return out
}

// The rules catch what they are for: each of these breaks one.
func TestNamingRulesCatch(t *testing.T) {
	doc := `{"components":{"schemas":{"X":{"properties":{
		"timeout_sec":{"type":"integer"}, "timeout":{"type":"integer"}, "wait":{"type":"number"},
		"size":{"type":"integer"}, "memory_mb":{"type":"integer"}, "bytes_up":{"type":"integer"},
		"time":{"type":"string","format":"date-time"}, "done_at":{"type":"integer"}, "id":{"type":"string"},
		"old":{"type":"integer","deprecated":true}}}}}}`
	got := namingViolations(t, []byte(doc))
	if len(got) != 10 {
		t.Errorf("%d violations, want 10:\n%s", len(got), strings.Join(got, "\n"))
	}
	ok := `{"components":{"schemas":{"X":{"properties":{
		"timeout_s":{"type":"integer"}, "duration_ms":{"type":"integer"}, "size_bytes":{"type":"integer"},
		"size_mib":{"type":"integer"}, "size":{"$ref":"#/components/schemas/SessionSize"}, "created_at":{"type":"string","format":"date-time"},
		"session_id":{"type":"string"}, "timed_out":{"type":"boolean"}}}}}}`
	if got := namingViolations(t, []byte(ok)); len(got) != 0 {
		t.Errorf("violations in a consistent schema: %v", got)
	}
}

// Every problem type the OpenAPI document names, and every one the code
// answers with, has an entry in the catalogue (docs/errors.md); every
// entry is answered by some code.
func TestProblemTypesCatalogued(t *testing.T) {
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`/problems/([a-z0-9-]+)`).FindAllStringSubmatch(string(raw), -1) {
		if _, ok := problem.Lookup(m[1]); !ok {
			t.Errorf("openapi.json names problem type %s, which is not in the catalogue (internal/problem/catalogue_entries.go)", m[1])
		}
	}
	if regexp.MustCompile(regexp.QuoteMeta(problem.LegacyTypePrefix) + `[a-z]`).Match(raw) {
		t.Errorf("openapi.json still names %s types", problem.LegacyTypePrefix)
	}

	used, dynamic := problemTypesInCode(t, filepath.Join("..", ".."))
	for slug, where := range used {
		if _, ok := problem.Lookup(slug); !ok {
			t.Errorf("%s answers problem type %q, which is not in the catalogue (internal/problem/catalogue_entries.go)", where, slug)
		}
	}
	// A type not written where it is answered: each of these passes on a
	// slug that is checked where it is written (the callers of invalid and
	// deny, the quota table) or reads a type back.
	known := map[string]bool{
		"api/mcp/errors.go slug":              true, // invalid(slug, ...): its callers are scanned
		"client/error.go slug":                true, // read back from a response
		"client/sse.go p.Type":                true,
		"error.go typ":                        true, // airlock.Problem itself
		"internal/problem/problem.go typ":     true,
		"service/quota/ledger.go k.Problem()": true, // the quota table (key.go) is scanned
		"service/broker/broker.go reason":     true, // deny(status, reason, ...): its callers are scanned
		"api/rest/problem.go typ":             true,
		"api/rest/server.go typ":              true,
		"service/broker/broker.go problem.TypePrefix + \"broker-\" + typ": true,
	}
	for _, d := range dynamic {
		if !known[d] {
			t.Errorf("problem type from an expression the scan cannot read: %s (write the slug as a literal or a Problem* constant)", d)
		}
	}
	for _, e := range problem.Catalogue() {
		if _, ok := used[e.Slug]; !ok {
			t.Errorf("catalogue entry %s is answered by no code: remove it", e.Slug)
		}
	}
}

var errorCode = regexp.MustCompile(`^(airlock\.)?E[A-Z]+$`)

// problemTypesInCode reads every non-test Go file of the module (not
// api/e2b, which answers in E2B's format) for the problem types it
// answers: the type argument of airlock.Problem, newProblem, problem.New
// and errorf; Type in an airlock.Error literal; Problem* constants; the
// slugs of the MCP front end's invalid and the broker's deny; the quota
// table's; and the slugs of the error codes.
func problemTypesInCode(t *testing.T, root string) (used map[string]string, dynamic []string) {
	used = map[string]string{}
	consts := map[string]string{}
	type site struct{ file, expr, pos string }
	var sites []site
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch rel {
			case ".git", "sdk", "api/e2b", "node_modules", "bin":
				return filepath.SkipDir
			}
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		add := func(e ast.Expr) {
			sites = append(sites, site{rel, exprString(fset, e), fset.Position(e.Pos()).String()})
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if i < len(n.Values) && strings.HasPrefix(strings.ToLower(name.Name), "problem") {
						if s, ok := stringLit(n.Values[i]); ok && problem.ValidSlug(s) {
							consts[name.Name] = s
							used[s] = rel
						}
					}
				}
			case *ast.CompositeLit:
				if rel == "service/quota/key.go" {
					for _, e := range n.Elts {
						if s, ok := stringLit(e); ok && strings.HasSuffix(s, "-quota") {
							used[s] = rel
						}
					}
				}
				if typeName(n.Type) != "Error" {
					return true
				}
				for _, e := range n.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Type" {
							add(kv.Value)
						}
					}
				}
			case *ast.CallExpr:
				name := typeName(n.Fun)
				_, plain := n.Fun.(*ast.Ident)
				switch {
				case (name == "Problem" || name == "newProblem" || name == "errorf" || (name == "New" && exprString(fset, n.Fun) == "problem.New")) &&
					len(n.Args) >= 2 && errorCode.MatchString(exprString(fset, n.Args[0])):
					add(n.Args[1])
				case name == "invalid" && plain && rel == "api/mcp/errors.go" || name == "invalid" && plain && strings.HasPrefix(rel, "api/mcp/"):
					if len(n.Args) >= 2 {
						add(n.Args[0])
					}
				case (name == "deny" || name == "writeProblem" && plain) && strings.HasPrefix(rel, "service/broker/"):
					i := 1
					if name == "writeProblem" {
						i = 2
					}
					if len(n.Args) > i {
						if s, ok := stringLit(n.Args[i]); ok {
							used["broker-"+s] = rel
						} else {
							add(n.Args[i])
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sites {
		if v, ok := stringLit(s.expr); ok {
			if v == "" {
				continue // the code's slug, below
			}
			used[v] = s.pos
			continue
		}
		last := s.expr[strings.LastIndex(s.expr, ".")+1:]
		if v, ok := consts[last]; ok {
			used[v] = s.pos
			continue
		}
		dynamic = append(dynamic, s.file+" "+s.expr)
	}
	for _, code := range []string{airlock.ECONFLICT, airlock.EINTERNAL, airlock.EINVALID, airlock.ENOTFOUND,
		airlock.EUNAUTHORIZED, airlock.EFORBIDDEN, airlock.ETOOLARGE, airlock.EUNAVAILABLE,
		airlock.ENOTIMPLEMENTED, airlock.ERATELIMITED, airlock.EUNPROCESSABLE} {
		used[problem.Slug(problem.New(code, "", 0, "").Type)] = "the code " + code
	}
	return used, dynamic
}

func stringLit(v any) (string, bool) {
	switch v := v.(type) {
	case *ast.BasicLit:
		if v.Kind == token.STRING {
			s, err := strconv.Unquote(v.Value)
			return s, err == nil
		}
	case string:
		s, err := strconv.Unquote(v)
		return s, err == nil
	}
	return "", false
}

func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.UnaryExpr:
		return typeName(e.X)
	}
	return ""
}

func exprString(fset *token.FileSet, e ast.Expr) string {
	var b strings.Builder
	if err := printer.Fprint(&b, fset, e); err != nil {
		return fmt.Sprintf("%T", e)
	}
	return b.String()
}

// A problem's type, resolved against the URI of the request that got it
// (RFC 9457, section 3.1.1), is the catalogue's entry for it, served
// without a key; so is an unknown slug's 404, and the whole list.
func TestProblemTypeResolves(t *testing.T) {
	e := newEnv(t)
	for _, r := range []req{
		{method: "GET", path: "/v1/no-such-route", key: e.keyA},
		{method: "POST", path: "/v1/execute", key: e.keyA, body: `{"language":"cobol","code":"x"}`, header: map[string]string{"Content-Type": "application/json"}},
		{method: "GET", path: "/v1/executions", key: "not-a-key"},
	} {
		resp := e.do(r)
		var p rest.Problem
		if err := json.Unmarshal(readBody(t, resp), &p); err != nil || !strings.HasPrefix(p.Type, rest.ProblemTypePrefix) {
			t.Fatalf("%s %s: %v %+v", r.method, r.path, err, p)
		}
		base, _ := url.Parse(e.srv.URL + r.path)
		ref, err := url.Parse(p.Type)
		if err != nil {
			t.Fatal(err)
		}
		at := base.ResolveReference(ref).String()
		page := e.doURL(req{method: "GET"}, at)
		body := string(readBody(t, page))
		slug := problem.Slug(p.Type)
		if page.StatusCode != 200 || !strings.Contains(body, `id="`+slug+`"`) {
			t.Errorf("%s (the type of %s %s) answers %d %.300s", at, r.method, r.path, page.StatusCode, body)
		}
		entry, _ := problem.Lookup(slug)
		if entry.Status != p.Status {
			t.Errorf("%s: answered with %d, catalogued with %d", slug, p.Status, entry.Status)
		}
	}
	resp := e.do(req{method: "GET", path: "/problems/no-such-type"})
	if body := string(readBody(t, resp)); resp.StatusCode != 404 || !strings.Contains(body, "problem-type-not-found") {
		t.Errorf("unknown slug: %d %s", resp.StatusCode, body)
	}
	resp = e.do(req{method: "GET", path: "/problems", header: map[string]string{"Accept": "application/json"}})
	var list []problem.Entry
	if err := json.Unmarshal(readBody(t, resp), &list); err != nil || len(list) != len(problem.Catalogue()) {
		t.Errorf("GET /problems as JSON: %d entries of %d (%v)", len(list), len(problem.Catalogue()), err)
	}
}
