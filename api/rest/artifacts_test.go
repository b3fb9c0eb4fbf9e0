package rest_test

import (
	"context"
	"mime"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
)

// runWithArtifact executes as A with one file and returns the artifact.
func runWithArtifact(t *testing.T, e *env, f testFile) (id, link string) {
	t.Helper()
	e.exec.setFiles(f)
	run := e.execute(e.keyA, okBody)
	a := run["artifacts"].([]any)[0].(map[string]any)
	return a["id"].(string), a["url"].(string)
}

func TestArtifactDownload(t *testing.T) {
	e := newEnv(t)
	const data = "<html><script>alert(1)</script></html>"
	_, link := runWithArtifact(t, e, testFile{`out/re"port é.html`, "text/html; charset=utf-8", data})

	resp := e.doURL(req{method: "GET"}, link)
	body := readBody(t, resp)
	if resp.StatusCode != 200 || string(body) != data {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	h := resp.Header
	for k, want := range map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"X-Content-Type-Options":  "nosniff",
		"Content-Security-Policy": "sandbox",
		"Content-Length":          strconv.Itoa(len(data)),
		"Accept-Ranges":           "bytes",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	disp, params, err := mime.ParseMediaType(h.Get("Content-Disposition"))
	if err != nil || disp != "attachment" || params["filename"] != `re"port é.html` {
		t.Errorf("Content-Disposition %q: %q %v %v", h.Get("Content-Disposition"), disp, params, err)
	}
	if !strings.Contains(h.Get("Content-Disposition"), `filename="re_port _.html"`) {
		t.Errorf("Content-Disposition %q lacks the ASCII fallback", h.Get("Content-Disposition"))
	}

	// Range.
	resp = e.doURL(req{method: "GET", header: map[string]string{"Range": "bytes=6-13"}}, link)
	if b := readBody(t, resp); resp.StatusCode != 206 || string(b) != data[6:14] {
		t.Errorf("range: %d %q", resp.StatusCode, b)
	}
}

func TestContentDispositionSanitised(t *testing.T) {
	e := newEnv(t)
	tests := []struct{ name, want string }{
		{"../../etc/passwd", "passwd"},
		{`C:\Users\x\evil.bat`, "evil.bat"},
		{"a\r\nSet-Cookie: x=1.txt", "aSet-Cookie: x=1.txt"},
		{"..", "artifact"},
		{"dir/", "dir"},
		{strings.Repeat("é", 300), strings.Repeat("é", 100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.t = t
			_, link := runWithArtifact(t, e, testFile{tt.name, "", "x"})
			resp := e.doURL(req{method: "GET"}, link)
			readBody(t, resp)
			cd := resp.Header.Get("Content-Disposition")
			_, params, err := mime.ParseMediaType(cd)
			if err != nil || params["filename"] != tt.want {
				t.Errorf("Content-Disposition %q: filename %q, want %q (%v)", cd, params["filename"], tt.want, err)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
				t.Errorf("Content-Type %q for an untyped artifact", ct)
			}
			if resp.Header.Get("Set-Cookie") != "" {
				t.Error("header injection")
			}
		})
	}
}

func TestArtifactLinks(t *testing.T) {
	e := newEnv(t)
	id, link := runWithArtifact(t, e, testFile{"a.txt", "text/plain", "data"})
	u, _ := url.Parse(link)
	q := u.Query()
	with := func(k, v string) string {
		q2 := url.Values{}
		for k, vs := range q {
			q2[k] = vs
		}
		if v == "" {
			q2.Del(k)
		} else {
			q2.Set(k, v)
		}
		u2 := *u
		u2.RawQuery = q2.Encode()
		return u2.String()
	}
	flip := func(s string) string {
		b := []byte(s)
		if b[len(b)-1] == '0' {
			b[len(b)-1] = '1'
		} else {
			b[len(b)-1] = '0'
		}
		return string(b)
	}
	exp, _ := strconv.ParseInt(q.Get("expires"), 10, 64)

	tests := []struct {
		name   string
		link   string
		status int
		slug   string
	}{
		{"tampered token", with("token", flip(q.Get("token"))), 404, "not-found"},
		{"token not hex", with("token", strings.Repeat("z", 64)), 404, "not-found"},
		{"short token", with("token", q.Get("token")[:10]), 404, "not-found"},
		{"no token", with("token", ""), 404, "not-found"},
		{"later expiry", with("expires", strconv.FormatInt(exp+3600, 10)), 404, "not-found"},
		{"expiry not a number", with("expires", "soon"), 404, "not-found"},
		{"other tenant", with("tenant", "someone-else"), 404, "not-found"},
		{"other key", with("key", e.keyID(e.keyB)), 404, "not-found"},
		{"no key", with("key", ""), 404, "not-found"},
		{"key of another tenant, signed", rest.SignArtifactURL(e.key, e.srv.URL, e.tenantA.ID, e.keyID(e.keyB), id, e.clock.Now().Add(time.Hour)), 404, "not-found"},
		{"other artifact", strings.Replace(link, "/v1/artifacts/"+id, "/v1/artifacts/other", 1), 404, "not-found"},
		{"signed with another key", rest.SignArtifactURL([]byte(strings.Repeat("x", 32)), e.srv.URL, e.tenantA.ID, e.keyID(e.keyA), id, e.clock.Now().Add(time.Hour)), 404, "not-found"},
		{"signed in the past", rest.SignArtifactURL(e.key, e.srv.URL, e.tenantA.ID, e.keyID(e.keyA), id, e.clock.Now().Add(-time.Second)), 401, "artifact-link-expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.t = t
			wantProblem(t, e.doURL(req{method: "GET"}, tt.link), tt.status, tt.slug)
		})
	}

	t.Run("valid while fresh", func(t *testing.T) {
		e.t = t
		resp := e.doURL(req{method: "GET"}, rest.SignArtifactURL(e.key, e.srv.URL, e.tenantA.ID, e.keyID(e.keyA), id, e.clock.Now().Add(time.Minute)))
		if b := readBody(t, resp); resp.StatusCode != 200 || string(b) != "data" {
			t.Errorf("got %d %q", resp.StatusCode, b)
		}
	})
	t.Run("expires after the TTL", func(t *testing.T) {
		e.t = t
		e.clock.Advance(rest.DefaultArtifactURLTTL + time.Second)
		resp := e.doURL(req{method: "GET"}, link)
		wantProblem(t, resp, 401, "artifact-link-expired")
		// The owner's key still works with an expired link.
		resp = e.doURL(req{method: "GET", key: e.keyA}, link)
		if b := readBody(t, resp); resp.StatusCode != 200 || string(b) != "data" {
			t.Errorf("owner with expired link: %d %q", resp.StatusCode, b)
		}
	})
	t.Run("wrong key is 401", func(t *testing.T) {
		e.t = t
		wantProblem(t, e.do(req{method: "GET", path: "/v1/artifacts/" + id, key: "alk_nope"}), 401, "unauthorized")
	})
}

func TestArtifactBlobMissing(t *testing.T) {
	e := newEnv(t)
	id, link := runWithArtifact(t, e, testFile{"a.txt", "text/plain", "data"})
	a, err := e.store.Artifact(context.Background(), e.tenantA.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.blobs.Delete(context.Background(), rest.ArtifactBlobKey(a)); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, e.doURL(req{method: "GET"}, link), 404, "not-found")
}

func TestArtifactBlobKey(t *testing.T) {
	got := rest.ArtifactBlobKey(&airlock.Artifact{ID: "a1", ExecutionID: "e1", TenantID: "t1"})
	if got != "artifacts/t1/e1/a1" {
		t.Errorf("ArtifactBlobKey = %q", got)
	}
}
