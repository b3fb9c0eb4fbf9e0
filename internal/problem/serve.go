package problem

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"strings"

	"github.com/airlockhq/airlock"
)

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Heading}}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body>
<h1>{{.Heading}}</h1>
<p>Airlock answers every error as an RFC 9457 problem document
(application/problem+json) whose <code>type</code> is
<code>/problems/&lt;slug&gt;</code>, a reference to this catalogue. Switch on the slug.</p>
<dl>
{{range .Entries}}<dt id="{{.Slug}}"><a href="/problems/{{.Slug}}"><code>{{.Slug}}</code></a> ({{.Status}}): {{.Title}}</dt>
<dd>{{.Summary}}</dd>
{{end}}</dl>
{{if .One}}<p><a href="/problems#{{(index .Entries 0).Slug}}">All problem types</a></p>{{end}}
</body></html>
`))

// wantsJSON reports whether the request's Accept prefers JSON to HTML.
func wantsJSON(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json", ContentType:
			return true
		case "text/html", "*/*", "text/*":
			return false
		}
	}
	return false
}

// ServeCatalogue answers GET /problems: every entry, as an HTML page with
// an anchor per slug, or as a JSON array when the request accepts JSON.
func ServeCatalogue(w http.ResponseWriter, r *http.Request) {
	serve(w, r, Catalogue(), false)
}

// ServeEntry answers GET /problems/{slug}: the entry, as HTML or JSON;
// a slug not in the catalogue is a 404 problem.
func ServeEntry(w http.ResponseWriter, r *http.Request, slug string) {
	e, ok := Lookup(slug)
	if !ok {
		WriteError(w, airlock.Problem(airlock.ENOTFOUND, "problem-type-not-found",
			"no problem type %q; GET /problems lists them", clip(slug, 100)))
		return
	}
	serve(w, r, []Entry{e}, true)
}

func serve(w http.ResponseWriter, r *http.Request, list []Entry, one bool) {
	h := w.Header()
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Add("Vary", "Accept")
	var body []byte
	if wantsJSON(r) {
		var err error
		if one {
			body, err = json.Marshal(withType(list[0]))
		} else {
			all := make([]entryJSON, len(list))
			for i, e := range list {
				all[i] = withType(e)
			}
			body, err = json.Marshal(all)
		}
		if err != nil {
			WriteError(w, err)
			return
		}
		h.Set("Content-Type", "application/json")
		body = append(body, '\n')
	} else {
		heading := "Airlock problem types"
		if one {
			heading = "Airlock problem type " + list[0].Slug
		}
		var buf bytes.Buffer
		if err := pageTmpl.Execute(&buf, struct {
			Heading string
			Entries []Entry
			One     bool
		}{heading, list, one}); err != nil {
			WriteError(w, err)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", "default-src 'none'")
		body = buf.Bytes()
	}
	if r.Method == http.MethodHead {
		return
	}
	w.Write(body)
}

type entryJSON struct {
	Entry
	Type string `json:"type"`
	Code string `json:"code"`
}

func withType(e Entry) entryJSON { return entryJSON{Entry: e, Type: e.Type(), Code: e.Code()} }

func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}

// Markdown renders the catalogue as docs/errors.md: a table of contents
// and one section per entry, whose anchor is the slug.
func Markdown() []byte {
	var b bytes.Buffer
	b.WriteString(`<!-- Generated from internal/problem/catalogue_entries.go; do not edit.
     Regenerate: go test ./internal/problem -run TestErrorsDoc -update -->
# Error catalogue

Every error Airlock's API answers is an RFC 9457 problem document
(` + "`application/problem+json`" + `):

` + "```json" + `
{"type": "/problems/unknown-language", "title": "Bad Request", "status": 400,
 "detail": "unknown language \"cobol\" (one of python, bash, node, sql)",
 "instance": "urn:airlock:request:…", "code": "invalid"}
` + "```" + `

- ` + "`type`" + ` is a relative reference, ` + "`/problems/<slug>`" + `. RFC 9457 resolves it
  against the URI of the request, so it names the catalogue page of the
  server that answered: ` + "`curl http://127.0.0.1:8080/problems/unknown-language`" + `
  shows the entry (HTML, or JSON with ` + "`Accept: application/json`" + `), and
  ` + "`GET /problems`" + ` lists them all. It is the same string whatever host, scheme or
  proxy the client came through, and from every node of a fleet. Switch on the
  slug, the part after ` + "`/problems/`" + `; the slugs below are stable.
  Servers before API 1.1.0 sent ` + "`urn:airlock:problem:<slug>`" + `; the Go client and
  the Python SDK read both.
- ` + "`status`" + ` is the HTTP status; ` + "`title`" + ` its text.
- ` + "`code`" + ` (deprecated, removed in API 2.0.0) is the error class in snake_case
  (` + "`invalid`" + `, ` + "`not_found`" + `, ` + "`rate_limited`" + `, ...). It says nothing ` + "`status`" + `
  does not: each status has one code. Use the slug, or the status.
- ` + "`instance`" + ` is ` + "`urn:airlock:request:<id>`" + `, the X-Request-Id of the request.
- Some problems carry more members: a quota refusal ` + "`quota`" + `, ` + "`limit`" + `, ` + "`used`" + `,
  ` + "`unit`" + ` and ` + "`resets_at`" + `; a guard refusal ` + "`findings`" + ` and ` + "`execution_id`" + `; an
  error event of a stream ` + "`retry_after`" + ` (seconds). A 429 or 503 that may pass
  carries ` + "`Retry-After`" + `.

Problems whose slug starts with ` + "`broker-`" + ` are answered to code inside a sandbox
by the credential broker, not by the API.

| slug | status | title |
|---|---|---|
`)
	list := Catalogue()
	for _, e := range list {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %d | %s |\n", e.Slug, e.Slug, e.Status, e.Title)
	}
	for _, e := range list {
		fmt.Fprintf(&b, "\n<a id=\"%s\"></a>\n## %s\n\n%d %s, code `%s`. %s\n", e.Slug, e.Slug, e.Status, http.StatusText(e.Status), e.Code(), e.Summary)
	}
	return b.Bytes()
}
