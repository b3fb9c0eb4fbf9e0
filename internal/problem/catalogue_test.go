package problem_test

import (
	"bytes"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/problem"
)

var update = flag.Bool("update", false, "rewrite docs/errors.md from the catalogue")

// docs/errors.md is the catalogue rendered; it fails when stale.
func TestErrorsDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "errors.md")
	want := problem.Markdown()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./internal/problem -run TestErrorsDoc -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/errors.md is stale: go test ./internal/problem -run TestErrorsDoc -update")
	}
	for _, e := range problem.Catalogue() {
		if !bytes.Contains(got, []byte(`<a id="`+e.Slug+`"></a>`)) {
			t.Errorf("docs/errors.md has no anchor for %s", e.Slug)
		}
	}
}

func TestCatalogueEntries(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range problem.Catalogue() {
		switch {
		case !problem.ValidSlug(e.Slug):
			t.Errorf("slug %q is not lower-case words joined by hyphens", e.Slug)
		case seen[e.Slug]:
			t.Errorf("slug %q twice", e.Slug)
		case http.StatusText(e.Status) == "" || e.Status < 400:
			t.Errorf("%s: status %d", e.Slug, e.Status)
		case e.Title == "" || e.Summary == "" || strings.Contains(e.Summary, "%"):
			t.Errorf("%s: title %q, summary %q", e.Slug, e.Title, e.Summary)
		}
		seen[e.Slug] = true
	}
	// The slugs derived from the error codes (a problem without a finer
	// type) are in the catalogue with their code's status.
	for _, code := range []string{airlock.ECONFLICT, airlock.EINTERNAL, airlock.EINVALID, airlock.ENOTFOUND,
		airlock.EUNAUTHORIZED, airlock.EFORBIDDEN, airlock.ETOOLARGE, airlock.EUNAVAILABLE,
		airlock.ENOTIMPLEMENTED, airlock.ERATELIMITED, airlock.EUNPROCESSABLE} {
		p := problem.New(code, "", 0, "x")
		e, ok := problem.Lookup(problem.Slug(p.Type))
		if !ok || e.Status != p.Status || e.Code() != code {
			t.Errorf("code %s: type %s, entry %+v (%v)", code, p.Type, e, ok)
		}
	}
}

func TestSlug(t *testing.T) {
	for typ, want := range map[string]string{
		"/problems/node-busy":                        "node-busy",
		"urn:airlock:problem:node-busy":              "node-busy",
		"https://airlock.example/problems/node-busy": "node-busy",
		"about:blank":                                "",
		"https://example.com/other":                  "",
		"":                                           "",
	} {
		if got := problem.Slug(typ); got != want {
			t.Errorf("Slug(%q) = %q, want %q", typ, got, want)
		}
	}
}

// A problem type URI resolves (against the request's URI) to its entry,
// as HTML or JSON; the list has an anchor per slug; an unknown slug is a
// 404 problem, and hostile slugs are not echoed as markup.
func TestCatalogueServed(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /problems", problem.ServeCatalogue)
	mux.HandleFunc("GET /problems/{slug}", func(w http.ResponseWriter, r *http.Request) {
		problem.ServeEntry(w, r, r.PathValue("slug"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	p := problem.New(airlock.EUNAVAILABLE, "node-busy", 0, "busy")
	get := func(path, accept string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp, b.String()
	}
	resp, body := get(p.Type, "")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, `id="node-busy"`) {
		t.Fatalf("GET %s: %d %s %.200s", p.Type, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp, body = get(p.Type, "application/json")
	if resp.StatusCode != 200 || !strings.Contains(body, `"slug":"node-busy"`) || !strings.Contains(body, `"status":503`) || !strings.Contains(body, `"type":"/problems/node-busy"`) {
		t.Fatalf("GET %s as JSON: %d %s", p.Type, resp.StatusCode, body)
	}
	resp, body = get("/problems", "")
	for _, e := range problem.Catalogue() {
		if !strings.Contains(body, `id="`+e.Slug+`"`) {
			t.Errorf("the list has no anchor for %s", e.Slug)
		}
	}
	resp, body = get("/problems/%3Cscript%3E", "")
	if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != problem.ContentType || !strings.Contains(body, "/problems/problem-type-not-found") || strings.Contains(body, "<script>") {
		t.Errorf("unknown slug: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}
