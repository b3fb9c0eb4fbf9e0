package fleet

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// FuzzRouting feeds hostile paths, headers and answer bodies to what the
// front reads of them: no panic, and a session ID is never empty when
// one is named, nor does it hold a slash.
func FuzzRouting(f *testing.F) {
	f.Add("POST", "/v1/sessions", "", `{"id":"s1"}`)
	f.Add("GET", "/v1/sessions/abc/files", "", `{"sessions":[{"id":"a"},{"id":""}]}`)
	f.Add("GET", "/sandboxes/x/timeout", "sbx", `{"sandboxID":"x"}`)
	f.Add("DELETE", "/v2/sandboxes//", "", `[`)
	f.Fuzz(func(t *testing.T, method, path, sandbox, body string) {
		u, err := url.Parse(path)
		if err != nil {
			return
		}
		r := &http.Request{Method: method, URL: u, Header: http.Header{}}
		if sandbox != "" {
			r.Header.Set(headerE2BSandbox, sandbox)
		}
		kind, id := classify(r)
		if kind != "" && id != "" {
			t.Fatalf("%s %s is both placed and for session %q", method, path, id)
		}
		if sandbox == "" && strings.Contains(id, "/") {
			t.Fatalf("session id %q from %s", id, path)
		}
		for _, id := range createdIDs([]byte(body)) {
			if id == "" {
				t.Fatalf("empty created ID from %q", body)
			}
		}
	})
}
