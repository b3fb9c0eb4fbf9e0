package fleet

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// FuzzRouting feeds hostile paths, headers and answer bodies to what the
// front reads of them: no panic, and a session ID is never empty when
// one is named, nor does it hold a slash.
func FuzzRouting(f *testing.F) {
	f.Add("POST", "/v1/sessions", "", `{"session_id":"s1"}`)
	f.Add("GET", "/v1/sessions/abc/files", "", `{"sessions":[{"session_id":"a"},{"session_id":""}]}`)
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

// createdIDs reads the API's own answers: a session, a fork's sessions.
func TestCreatedIDs(t *testing.T) {
	one, _ := json.Marshal(&airlock.Session{ID: "s1"})
	fork, _ := json.Marshal(&airlock.ForkResult{Sessions: []*airlock.Session{{ID: "c1"}, {ID: "c2"}}})
	for _, tc := range []struct {
		body []byte
		want []string
	}{
		{one, []string{"s1"}},
		{fork, []string{"c1", "c2"}},
		{[]byte(`{"sandboxID":"e1"}`), []string{"e1"}},
		{[]byte(`not json`), nil},
	} {
		if got := createdIDs(tc.body); !slices.Equal(got, tc.want) {
			t.Errorf("createdIDs(%s) = %v, want %v", tc.body, got, tc.want)
		}
	}
}
