package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/api/console"
)

// TestHandler checks what is served and how, without a browser: every
// script the page loads is there as JavaScript under the strict
// Content-Security-Policy; other methods are refused; /console redirects
// relatively; the scripts use no sink that turns a string into HTML or
// code, and keep the key out of local storage and URLs; every view
// (templates, volumes, events and webhooks among them) has its script
// and its section.
func TestHandler(t *testing.T) {
	h := console.Handler()
	get := func(method, path string) *http.Response {
		t.Helper()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		return w.Result()
	}
	read := func(r *http.Response) string {
		b, _ := io.ReadAll(r.Body)
		return string(b)
	}

	index := get(http.MethodGet, "/console/")
	if index.StatusCode != http.StatusOK || !strings.HasPrefix(index.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("index: %d %s", index.StatusCode, index.Header.Get("Content-Type"))
	}
	page := read(index)
	scripts := regexp.MustCompile(`<script src="([a-z]+\.js)" defer></script>`).FindAllStringSubmatch(page, -1)
	if len(scripts) < 2 || scripts[len(scripts)-1][1] != "app.js" {
		t.Fatalf("the page's scripts: %v (app.js, the router, must load last)", scripts)
	}
	// Every view has its script and its section in the top bar.
	for _, view := range []string{"executions", "sessions", "templates", "volumes", "snapshots", "events", "webhooks", "egress"} {
		if !strings.Contains(page, `<a href="#/`+view+`" data-section="`+view+`">`) {
			t.Errorf("the top bar has no %s section", view)
		}
	}
	loaded := map[string]bool{}
	for _, s := range scripts {
		loaded[s[1]] = true
	}
	for _, js := range []string{"templates.js", "volumes.js", "events.js", "webhooks.js"} {
		if !loaded[js] {
			t.Errorf("the page does not load %s", js)
		}
	}
	if strings.Contains(strings.ReplaceAll(page, `<script src=`, ``), "<script") {
		t.Error("the page has an inline script")
	}
	csp := index.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self';", "frame-ancestors 'none'", "require-trusted-types-for 'script'", "trusted-types 'none'", "connect-src 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy %q allows something unsafe", csp)
	}
	// Sinks that would make a string HTML or code, and places a key must
	// not go.
	banned := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|localStorage\.setItem|setTimeout\(['"]|location\.search`)
	for _, s := range scripts {
		r := get(http.MethodGet, "/console/"+s[1])
		body := read(r)
		if r.StatusCode != http.StatusOK || !strings.Contains(r.Header.Get("Content-Type"), "javascript") ||
			r.Header.Get("Content-Security-Policy") != csp || r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d %q, CSP %q", s[1], r.StatusCode, r.Header.Get("Content-Type"), r.Header.Get("Content-Security-Policy"))
		}
		if m := banned.FindString(body); m != "" {
			t.Errorf("%s uses %s", s[1], m)
		}
		if !strings.HasPrefix(strings.SplitN(body, "'use strict'", 2)[0], "//") {
			t.Errorf("%s does not start with its comment and 'use strict'", s[1])
		}
	}

	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		if r := get(m, "/console/"); r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /console/: %d %q", m, r.StatusCode, r.Header.Get("Allow"))
		}
	}
	if r := get(http.MethodGet, "/console"); r.StatusCode != http.StatusMovedPermanently || r.Header.Get("Location") != "console/" {
		t.Errorf("/console: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	if r := get(http.MethodGet, "/console/no-such-file.js"); r.StatusCode != http.StatusNotFound {
		t.Errorf("a missing file: %d", r.StatusCode)
	}
	if r := get(http.MethodHead, "/console/app.css"); r.StatusCode != http.StatusOK || r.Header.Get("Content-Security-Policy") != csp {
		t.Errorf("HEAD app.css: %d", r.StatusCode)
	}
}
