package rest_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
)

func TestParsePublicURL(t *testing.T) {
	e := setup(t)
	for _, ok := range []string{
		"https://airlock.example.com",
		"https://airlock.example.com/",
		"https://airlock.example.com/base",
		"https://airlock.example.com/base/",
		"http://10.0.0.7:8080/a/b",
		"https://[::1]:8443/x%20y",
	} {
		if _, err := rest.ParsePublicURL(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "airlock.example.com", "/base", "//airlock.example.com/base", "ftp://airlock.example.com",
		"https://airlock.example.com/?q=1", "https://airlock.example.com/?", "https://airlock.example.com/#top",
		"https://airlock.example.com/#", "https://user:pw@airlock.example.com/", "https://:8443/", "https:airlock",
		"mailto:ops@example.com", "https://airlock.example.com/%zz",
	} {
		_, err := rest.ParsePublicURL(bad)
		if airlock.ErrorCode(err) != airlock.EINVALID {
			t.Errorf("%q: %v, want an invalid error", bad, err)
		}
		if bad == "" {
			continue // no public URL: links from the request
		}
		cfg := rest.Config{Store: e.store, Blobs: e.blobs, Executor: e.exec, SigningKey: e.key, PublicURL: bad}
		if _, err := rest.New(cfg); err == nil || !strings.Contains(err.Error(), "public URL") {
			t.Errorf("New with public URL %q: %v", bad, err)
		}
	}
}

// With a public URL, artifact URLs are built from it, its base path kept
// and joined with exactly one slash, whatever Host the request came with;
// the links work against the server itself (a proxy that strips the base
// path would serve them).
func TestArtifactURLsFromPublicURL(t *testing.T) {
	for public, want := range map[string]string{
		"https://airlock.example.com/base":   "https://airlock.example.com/base/v1/artifacts/",
		"https://airlock.example.com/base/":  "https://airlock.example.com/base/v1/artifacts/",
		"https://airlock.example.com":        "https://airlock.example.com/v1/artifacts/",
		"https://airlock.example.com/":       "https://airlock.example.com/v1/artifacts/",
		"http://10.0.0.7:8080/a/b%20c//":     "http://10.0.0.7:8080/a/b%20c/v1/artifacts/",
		"https://AIRLOCK.example.com:443/x/": "https://AIRLOCK.example.com:443/x/v1/artifacts/",
	} {
		t.Run(public, func(t *testing.T) {
			e := newEnv(t, func(c *rest.Config) { c.PublicURL = public })
			e.exec.setFiles(testFile{"plot.png", "image/png", "png"})
			run := e.execute(e.keyA, okBody)
			a := run["artifacts"].([]any)[0].(map[string]any)
			id, link := a["id"].(string), a["url"].(string)
			if !strings.HasPrefix(link, want+id+"?") {
				t.Fatalf("artifact URL %q, want it to start %q", link, want+id+"?")
			}
			// The same URL from the execution record and the list.
			var ex airlock.Execution
			decodeJSON(t, e.do(req{method: "GET", path: "/v1/executions/" + run["execution_id"].(string), key: e.keyA}), 200, &ex)
			if len(ex.Artifacts) != 1 || !strings.HasPrefix(ex.Artifacts[0].URL, want+id+"?") {
				t.Errorf("GET execution: artifacts %+v", ex.Artifacts)
			}
			var page airlock.ExecutionPage
			decodeJSON(t, e.do(req{method: "GET", path: "/v1/executions", key: e.keyA}), 200, &page)
			for _, x := range page.Executions {
				for _, a := range x.Artifacts {
					if !strings.HasPrefix(a.URL, want) {
						t.Errorf("list executions: artifact URL %q", a.URL)
					}
				}
			}
			u, err := url.Parse(link)
			if err != nil {
				t.Fatal(err)
			}
			resp := e.doURL(req{method: "GET"}, e.srv.URL+"/v1/artifacts/"+id+"?"+u.RawQuery)
			if body := readBody(t, resp); resp.StatusCode != http.StatusOK || string(body) != "png" {
				t.Errorf("the signed link does not work: %d %q", resp.StatusCode, body)
			}
		})
	}
}

// Without a public URL, links name the host the request came to.
func TestArtifactURLsFromRequest(t *testing.T) {
	e := newEnv(t)
	id, link := runWithArtifact(t, e, testFile{"a.txt", "text/plain", "a"})
	if want := e.srv.URL + "/v1/artifacts/" + id + "?"; !strings.HasPrefix(link, want) {
		t.Errorf("artifact URL %q, want it to start %q", link, want)
	}
}
