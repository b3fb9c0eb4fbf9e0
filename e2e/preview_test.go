package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// previewServer is the server the test runs inside a session: a page
// that opens a WebSocket back to where it came from and echoes through
// it, a JSON answer of what it was asked, and a WebSocket echo (the
// standard library has none: a small one, RFC 6455 text frames only).
const previewServer = `
import base64, hashlib, json, struct, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGE = b"""<!doctype html><title>preview</title><p id=p>loaded</p><script>
const u = new URL('ws', location.href.replace(/[?#].*$/, '').replace(/\\/?$/, '/'));
u.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
const ws = new WebSocket(u);
ws.onopen = () => ws.send('hello through ' + location.host);
ws.onmessage = (e) => { window.echoed = e.data; document.getElementById('p').textContent = e.data; };
ws.onerror = () => { window.echoed = 'error'; };
</script>"""

class H(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path.endswith('/ws') and self.headers.get('Upgrade', '').lower() == 'websocket':
            return self.ws()
        if self.path.startswith('/page') or self.path == '/':
            body = PAGE
            self.send_response(200)
            self.send_header('Content-Type', 'text/html')
        else:
            body = json.dumps({'marker': 'from-the-sandbox', 'path': self.path, 'host': self.headers.get('Host'),
                'authorization': self.headers.get('Authorization'), 'cookie': self.headers.get('Cookie'),
                'token': self.headers.get('X-Airlock-Preview-Token')}).encode()
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def ws(self):
        key = self.headers['Sec-WebSocket-Key'].encode()
        acc = base64.b64encode(hashlib.sha1(key + b'258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest()).decode()
        self.send_response(101)
        self.send_header('Upgrade', 'websocket')
        self.send_header('Connection', 'Upgrade')
        self.send_header('Sec-WebSocket-Accept', acc)
        self.end_headers()
        self.wfile.flush()
        r = self.rfile
        while True:
            h = r.read(2)
            if len(h) < 2: return
            op, n = h[0] & 15, h[1] & 127
            if n == 126: n = struct.unpack('>H', r.read(2))[0]
            elif n == 127: n = struct.unpack('>Q', r.read(8))[0]
            mask = r.read(4) if h[1] & 128 else b'\0\0\0\0'
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(r.read(n)))
            if op == 8: return
            if op != 1: continue
            out = b'\x81' + (bytes([len(data)]) if len(data) < 126 else b'\x7e' + struct.pack('>H', len(data))) + data
            self.wfile.write(out)
            self.wfile.flush()

ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
`

const previewDomain = "preview.localhost"

func TestPreview(t *testing.T) {
	n, d := startNode(t, nodeOptions{name: "preview", images: []string{"python-ds"}},
		append(quiet, "--preview-domain", previewDomain, "--abuse=false")...)
	ctx := context.Background()
	keyA := n.key()
	ca := newClient(t, d.url, keyA)
	keyB := newTenantKey(t, n.dir, "preview-b", airlock.NewAPIKey)

	// Sessions have no network unless they ask: previews need none.
	sa, _, err := ca.CreateSession(ctx, airlock.CreateSessionRequest{Image: "python-ds"})
	if err != nil {
		t.Fatal(err)
	}
	sb, _, err := ca.CreateSession(ctx, airlock.CreateSessionRequest{Image: "python-ds"})
	if err != nil {
		t.Fatal(err)
	}
	if sa.Network.Mode != airlock.NetworkNone {
		t.Fatalf("session has a network: %+v", sa.Network)
	}
	for _, s := range []*airlock.Session{sa, sb} {
		if _, err := ca.PutFile(ctx, s.ID, "srv.py", strings.NewReader(previewServer), int64(len(previewServer))); err != nil {
			t.Fatal(err)
		}
		if ex, err := ca.Exec(ctx, s.ID, airlock.SessionExecRequest{Shell: "setsid python3 srv.py 8000 </dev/null >/workspace/srv.log 2>&1 & sleep 0.2"}); err != nil || ex.ExitCode != 0 {
			t.Fatalf("start the server: %+v %v", ex, err)
		}
	}
	pathURL := func(s *airlock.Session, rest string) string {
		return d.url + "/v1/sessions/" + s.ID + "/ports/8000" + rest
	}
	hostOf := func(s *airlock.Session) string { return fmt.Sprintf("8000-%s.%s", s.ID, previewDomain) }
	get := func(u, host string, hdr map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("GET", u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 60 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	bearer := func(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }
	for _, s := range []*airlock.Session{sa, sb} {
		deadline := time.Now().Add(90 * time.Second)
		for {
			code, body := get(pathURL(s, "/x"), "", bearer(keyA))
			if code == 200 {
				break
			}
			if time.Now().After(deadline) {
				ex, err := ca.Exec(ctx, s.ID, airlock.SessionExecRequest{Shell: "cat /workspace/srv.log; ls /proc"})
				if err == nil {
					t.Logf("in the session: %s %s", ex.Stdout, ex.Stderr)
				}
				t.Fatalf("the server in the session did not answer: %d %s", code, body)
			}
			time.Sleep(200 * time.Millisecond) // polling the server's start, bounded by the deadline
		}
	}

	// The tenant's key, both forms; the key does not reach the app.
	code, body := get(pathURL(sa, "/json?q=1"), "", bearer(keyA))
	if code != 200 || !strings.Contains(body, "from-the-sandbox") || strings.Contains(body, keyA) {
		t.Fatalf("path form: %d %s", code, body)
	}
	code, body = get(d.url+"/json", hostOf(sa), bearer(keyA))
	if code != 200 || !strings.Contains(body, `"host": "`+hostOf(sa)) {
		t.Fatalf("host form: %d %s", code, body)
	}
	// Private by default: no credentials, another tenant's key, a
	// revoked key.
	for _, c := range []struct {
		what string
		hdr  map[string]string
		want int
	}{{"no credentials", nil, 401}, {"another tenant's key", bearer(keyB), 404}} {
		if code, body := get(pathURL(sa, "/"), "", c.hdr); code != c.want {
			t.Errorf("%s, path form: %d %s", c.what, code, body)
		}
		if code, body := get(d.url+"/", hostOf(sa), c.hdr); code != c.want {
			t.Errorf("%s, host form: %d %s", c.what, code, body)
		}
	}
	k2, err := ca.CreateKey(ctx, client.CreateKeyRequest{Name: "preview-revoked"})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := get(pathURL(sa, "/"), "", bearer(k2.Key)); code != 200 {
		t.Fatalf("a fresh key: %d", code)
	}
	if _, err := ca.RevokeKey(ctx, k2.ID); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(pathURL(sa, "/"), "", bearer(k2.Key)); code != 401 {
		t.Errorf("a revoked key, path form: %d", code)
	}
	if code, _ := get(d.url+"/", hostOf(sa), bearer(k2.Key)); code != 401 {
		t.Errorf("a revoked key, host form: %d", code)
	}
	// Another tenant's key on the token and port routes.
	for _, m := range []string{"POST /token", "DELETE /token", "GET ", "PUT "} {
		method, rest, _ := strings.Cut(m, " ")
		var body io.Reader
		if method == "PUT" {
			body = strings.NewReader(`{"public": true}`)
		}
		req, _ := http.NewRequest(method, pathURL(sa, rest), body)
		req.Header.Set("Authorization", "Bearer "+keyB)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("tenant B: %s %s: %d", method, rest, resp.StatusCode)
		}
	}

	// A token opens its session's port only, until revoked.
	tok := previewToken(t, d.url, keyA, sa.ID, 600)
	th := map[string]string{"X-Airlock-Preview-Token": tok.Token}
	if code, body := get(pathURL(sa, "/json"), "", th); code != 200 || strings.Contains(body, tok.Token) {
		t.Fatalf("token: %d %s", code, body)
	}
	if code, _ := get(d.url+"/json", hostOf(sa), th); code != 200 {
		t.Fatalf("token, host form: %d", code)
	}
	if code, _ := get(pathURL(sb, "/json"), "", th); code != 401 {
		t.Errorf("session A's token on session B: %d", code)
	}
	if code, _ := get(d.url+"/json", hostOf(sb), th); code != 401 {
		t.Errorf("session A's token on session B, host form: %d", code)
	}

	// A real browser: the page, then a WebSocket echo, by both forms,
	// with the token in the query (exchanged for a cookie).
	browse(t, "http://"+hostOf(sa)+":"+portOf(d.url)+"/page?"+url.Values{"airlock_token": {tok.Token}}.Encode(), "hello through "+hostOf(sa)+":"+portOf(d.url))
	browse(t, pathURL(sa, "/page/?")+url.Values{"airlock_token": {tok.Token}}.Encode(), "hello through "+strings.TrimPrefix(d.url, "http://"))

	revoke(t, d.url, keyA, sa.ID)
	if code, _ := get(pathURL(sa, "/json"), "", th); code != 401 {
		t.Errorf("revoked token: %d", code)
	}

	// A public port needs nothing.
	setPublic(t, d.url, keyA, sa.ID, true)
	if code, _ := get(pathURL(sa, "/json"), "", nil); code != 200 {
		t.Errorf("public port, path form: %d", code)
	}
	if code, _ := get(d.url+"/json", hostOf(sa), nil); code != 200 {
		t.Errorf("public port, host form: %d", code)
	}
	if code, _ := get(d.url+"/json", hostOf(sb), nil); code != 401 {
		t.Errorf("session B's port after A's was made public: %d", code)
	}

	// Probes: hosts that name something else under the domain, and
	// paths that try to leave the port.
	for _, h := range []string{
		"8000-" + sa.ID + "." + previewDomain + ".evil.test", "0-" + sa.ID + "." + previewDomain,
		"8080-" + sa.ID[:31] + "." + previewDomain, "api." + previewDomain, "169.254.169.254-" + sa.ID + "." + previewDomain,
	} {
		if code, body := get(d.url+"/v1/keys", h, bearer(keyA)); code != 404 || !strings.Contains(body, "preview-host-invalid") {
			t.Errorf("host %q: %d %s", h, code, body)
		}
	}
	for _, p := range []string{"/../../../v1/keys", "/%2e%2e/%2e%2e/v1/keys", "//169.254.169.254/latest/meta-data/"} {
		code, body := get(d.url+p, hostOf(sa), nil)
		if code == 200 && !strings.Contains(body, "from-the-sandbox") {
			t.Errorf("path %q left the port: %s", p, body)
		}
	}
	// A port of the node's own loopback is never reached: the port is
	// the sandbox's.
	if code, body := get(d.url+"/", fmt.Sprintf("%s-%s.%s", portOf(d.url), sa.ID, previewDomain), bearer(keyA)); code == 200 {
		t.Errorf("airlockd's own port through a preview: %d %s", code, body)
	}

	// One audit entry per request in the session's log.
	page, err := ca.SessionEgress(ctx, sa.ID, airlock.EgressFilter{Kind: airlock.EgressPreview, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) < 5 {
		t.Fatalf("%d preview entries in the session's log", len(page.Events))
	}
	ev := page.Events[len(page.Events)-1]
	if ev.Kind != airlock.EgressPreview || ev.Port != 8000 || ev.BytesDown == 0 || ev.Protocol == "" || ev.Name == "" {
		t.Errorf("audit entry %+v", ev)
	}
}

func portOf(u string) string {
	p, _ := url.Parse(u)
	return p.Port()
}

func previewToken(t *testing.T, base, key, sid string, ttl int) *airlock.PreviewToken {
	t.Helper()
	var tok airlock.PreviewToken
	apiJSON(t, "POST", base+"/v1/sessions/"+sid+"/ports/8000/token", key, fmt.Sprintf(`{"ttl_s": %d}`, ttl), 201, &tok)
	return &tok
}

func revoke(t *testing.T, base, key, sid string) {
	t.Helper()
	apiJSON(t, "DELETE", base+"/v1/sessions/"+sid+"/ports/8000/token", key, "", 200, nil)
}

func setPublic(t *testing.T, base, key, sid string, public bool) {
	t.Helper()
	var p airlock.PreviewPort
	apiJSON(t, "PUT", base+"/v1/sessions/"+sid+"/ports/8000", key, fmt.Sprintf(`{"public": %v}`, public), 200, &p)
	if p.Public != public {
		t.Fatalf("port %+v", p)
	}
}

func apiJSON(t *testing.T, method, u, key, body string, want int, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s", method, u, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
}

// browse loads u in headless Chromium and waits for the page's
// WebSocket echo to say want.
func browse(t *testing.T, u, want string) {
	t.Helper()
	const chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("Chromium is not installed at " + chromium)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Flag("headless", true), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.UserDataDir(t.TempDir()))
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancelT := context.WithTimeout(bctx, 90*time.Second)
	defer cancelT()
	err := chromedp.Do(ctx, chromedp.Navigate(u),
		chromedp.Poll[chromedp.Void]("window.echoed !== undefined", chromedp.WithPollingTimeout(60*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		t.Fatalf("browse %s: %v", u, err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string]("window.echoed"))
	if err != nil || got != want {
		t.Fatalf("browse %s: the WebSocket echoed %q (%v), want %q", u, got, err, want)
	}
	loc, err := chromedp.Run(ctx, chromedp.Evaluate[string]("location.href"))
	if err != nil || strings.Contains(loc, "airlock_token") {
		t.Fatalf("the page kept the token in its URL: %s %v", loc, err)
	}
}
