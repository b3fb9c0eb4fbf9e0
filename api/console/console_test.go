package console_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/console"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/testnet"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/egress"
	"github.com/airlockhq/airlock/service/watch"
	"github.com/airlockhq/airlock/store/sqlite"
)

// chromium is Debian's package, which scripts/setup.sh installs.
const chromium = "/usr/bin/chromium"

const chartCode = `import matplotlib.pyplot as plt
plt.figure(figsize=(6,3))
plt.plot([1,2,3,4],[10,25,18,35],color="#3b82f6")
plt.title("Agent Performance")
plt.savefig("output.png")`

// outputDir is where the screenshots go: $AIRLOCK_TEST_OUTPUT/console
// (scripts/test.sh sets it), else a folder in the temporary directory.
func outputDir(t *testing.T) string {
	base := os.Getenv("AIRLOCK_TEST_OUTPUT")
	if base == "" {
		base = filepath.Join(os.TempDir(), "airlock-test-output")
	}
	dir := filepath.Join(base, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// netTenant is the tenant whose one-shot runs may reach api.test: its
// default allow list.
const netTenant = "console-a"

// newStack is a node with the console beside the API and a real egress
// control in front of a test internet (network namespaces the test makes
// and removes), where api.test serves HTTP.
func newStack(t *testing.T) *teststack.Stack {
	inet := testnet.New(t)
	inet.SetName("api.test", inet.ServeHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from api.test\n")
	})))
	store, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	var r [2]byte
	rand.Read(r[:])
	eg, err := egress.New(egress.Config{
		Store:       store,
		Prefix:      "c" + hex.EncodeToString(r[:]),
		Subnet:      netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200 + r[0]%40, r[1] &^ 3, 0}), 22),
		Upstreams:   []string{inet.Upstream()},
		Permit:      []netip.Prefix{inet.Prefix},
		PeekTimeout: time.Second,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	eg.Start()
	// Registered before the stack's, so it runs after the sandboxes are gone.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := eg.Close(ctx); err != nil {
			t.Errorf("close egress: %v", err)
		}
		if err := eg.CheckClean(); err != nil {
			t.Error(err)
		}
	})
	return teststack.New(t, teststack.Options{
		Store:      store,
		MaxTimeout: 60 * time.Second,
		Egress:     eg,
		EgressLog:  store,
		NetworkAllow: func(tn *airlock.Tenant) []string {
			if tn.Name == netTenant {
				return []string{"api.test"}
			}
			return nil
		},
		WrapSessions: func(svc airlock.SessionService) airlock.SessionService {
			w, err := watch.New(watch.Config{Sessions: svc})
			if err != nil {
				t.Fatal(err)
			}
			return w
		},
		Serve: func(_ *teststack.Stack, api http.Handler) http.Handler {
			mux := http.NewServeMux()
			mux.Handle(console.Prefix, console.Handler())
			mux.Handle("/console", console.Handler())
			mux.Handle("/", api)
			return mux
		},
	})
}

// netCode reaches api.test, which its allow list admits, and asks for
// other.test, which it does not: the resolver refuses the name.
const netCode = `import socket, urllib.request
print(urllib.request.urlopen("http://api.test/", timeout=8).read().decode(), end="")
try:
    socket.getaddrinfo("other.test", 443)
    print("resolved other.test")
except OSError:
    print("other.test refused")`

// TestConsoleInBrowser signs in to the console in headless Chromium and
// finds what was made through the API: an execution with its chart shown,
// a networked run whose egress log shows the name it was denied (and
// narrows to the denied events with the form's filter), and a session
// whose running command's output streams into the page;
// screenshots at 1280 and 390 pixels wide. Any console error in the page
// (a script error, a failed request, a CSP violation) fails the test.
func TestConsoleInBrowser(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		testreq.Skip(t, "Chromium is not installed at "+chromium+" (scripts/setup.sh installs Debian's chromium package)")
	}
	s := newStack(t)
	a := s.NewTenant(t, netTenant)
	ctx := context.Background()

	// Made through the API: a chart, and a session with a command that
	// prints until it is told to stop.
	e, err := a.Client.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Python, Code: chartCode, TimeoutSec: 30})
	if err != nil || e.ExitCode != 0 || len(e.Artifacts) != 1 {
		t.Fatalf("chart: %v %+v", err, e)
	}
	// A one-shot run with a network: one allowed and one denied name in
	// its egress log, read back through the API before the browser looks.
	ne, err := a.Client.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Python, Code: netCode, AllowNetwork: true, TimeoutSec: 30})
	if err != nil || ne.ExitCode != 0 || ne.Stdout != "hello from api.test\nother.test refused\n" || !ne.HadNetworkAttempt {
		t.Fatalf("networked run: %v %+v", err, ne)
	}
	testreq.Eventually(t, 10*time.Second, "the run's egress events", func() bool {
		denied, err1 := a.Client.ExecutionEgress(ctx, ne.ID, airlock.EgressFilter{Verdict: airlock.VerdictDenied})
		conns, err2 := a.Client.ExecutionEgress(ctx, ne.ID, airlock.EgressFilter{Kind: airlock.EgressConnection, Verdict: airlock.VerdictAllowed})
		return err1 == nil && err2 == nil && hasName(denied, "other.test") && hasName(conns, "api.test") && !hasName(denied, "api.test")
	})
	sess, _, err := a.Client.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Client.DeleteSession(ctx, sess.ID)
	if _, err := a.Client.PutFile(ctx, sess.ID, "notes.txt", strings.NewReader("hello"), 5); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.Client.Exec(ctx, sess.ID, airlock.SessionExecRequest{
			Shell: "i=0; while [ ! -e /tmp/stop ]; do i=$((i+1)); echo tick $i; sleep 0.2; done; echo stopped", TimeoutSec: 60})
		done <- err
	}()
	defer func() {
		a.Client.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "touch /tmp/stop"})
		if err := <-done; err != nil {
			t.Errorf("the ticking command: %v", err)
		}
	}()
	testreq.Eventually(t, 30*time.Second, "the command to run", func() bool {
		got, err := a.Client.Session(ctx, sess.ID)
		return err == nil && len(got.Running) == 1
	})

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("hide-scrollbars", true), // screenshots as wide as the viewport
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		t.Fatalf("start %s: %v", chromium, err)
	}
	var mu sync.Mutex
	var problems []string
	messages := chromedp.Console(bctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() || m.Type == chromedp.ConsoleWarning {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s %s:%d %s", m.Type, m.URL, m.Line+1, m))
				mu.Unlock()
			}
		}
	}()

	out := outputDir(t)
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(out, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, 45*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	poll := func(expr string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(40*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))
	}
	hash := func(h string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.hash = %q", h))(ctx, t)
			return err
		})
	}
	execLink := fmt.Sprintf(`a[href="#/executions/%s"]`, e.ID)

	for i, width := range []int64{1280, 390} {
		step("open the console", chromedp.EmulateViewport(width, 900), chromedp.Navigate(s.URL+"/console/"))
		if i == 0 {
			// Keyboard: the first Tab reaches the skip link; the key is
			// typed and the form sent with Enter.
			step("sign in",
				chromedp.WaitVisible(chromedp.CSS("#key")),
				chromedp.SendKeys(chromedp.CSS("#key"), a.Key+"\r"))
		}
		step("find the execution", chromedp.WaitVisible(chromedp.CSS(execLink)))
		shot(fmt.Sprintf("executions-%d.png", width))
		step("open the execution", chromedp.Click(chromedp.CSS(execLink)),
			poll(`(() => { const i = document.querySelector('.artifact img'); return i && i.complete && i.naturalWidth === 600 && i.naturalHeight === 300; })()`),
			poll(`document.querySelector('.bar span') !== null`))
		shot(fmt.Sprintf("execution-%d.png", width))
		step("open the session", hash("#/sessions/"+sess.ID),
			poll(`(document.getElementById('live-output') || {textContent: ''}).textContent.includes('tick')`),
			poll(`document.getElementById('files') && document.getElementById('files').textContent.includes('notes.txt')`))
		// The output keeps coming: a later tick than the first one seen.
		first, err := chromedp.Run(bctx, chromedp.Evaluate[int](`Math.max(...[...document.getElementById('live-output').textContent.matchAll(/tick (\d+)/g)].map(m => +m[1]))`))
		if err != nil {
			t.Fatal(err)
		}
		step("see the output stream", poll(fmt.Sprintf(`Math.max(...[...document.getElementById('live-output').textContent.matchAll(/tick (\d+)/g)].map(m => +m[1])) > %d`, first+2)))
		shot(fmt.Sprintf("session-%d.png", width))
		step("open the networked run", hash("#/executions/"+ne.ID),
			poll(egressRow("#execution-egress", "other.test", "denied")),
			poll(egressRow("#execution-egress", "api.test", "allowed")))
		shot(fmt.Sprintf("execution-egress-%d.png", width))
		step("open its egress log", hash("#/egress?execution="+ne.ID),
			poll(fmt.Sprintf(`(document.querySelector('#source') || {}).value === %q`, "execution:"+ne.ID)),
			poll(egressRow("#egress-log", "other.test", "denied")),
			poll(egressRow("#egress-log", "api.test", "allowed")))
		// The filter, set from the form: only the denied events are left.
		step("filter the egress log",
			chromedp.SetValue(chromedp.CSS("#verdict"), "denied"),
			chromedp.Click(chromedp.CSS("form.toolbar button[type=submit]")),
			poll(`location.hash.includes('verdict=denied') && location.hash.includes('execution=')`),
			poll(egressRow("#egress-log", "other.test", "denied")),
			poll(`!(document.querySelector('#egress-log') || {textContent: 'api.test'}).textContent.includes('api.test') && [...document.querySelectorAll('#egress-log tbody tr')].every(r => r.textContent.includes('denied'))`))
		shot(fmt.Sprintf("egress-%d.png", width))
		step("open a session's egress log", hash("#/egress?session="+sess.ID),
			poll(fmt.Sprintf(`(document.querySelector('#source') || {}).value === %q && document.body.textContent.includes('No egress events match')`, "session:"+sess.ID)))
		if width == 390 {
			// Nothing wider than the screen but the tables, which scroll
			// in their own box.
			w, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
			if err != nil || w > 390 {
				t.Errorf("page width at 390: %d (%v)", w, err)
			}
		}
	}

	// Keyboard: Tab from the top reaches the skip link first, and every
	// control is reachable.
	step("keyboard", chromedp.Navigate("about:blank"), chromedp.Navigate(s.URL+"/console/#/executions"), chromedp.WaitVisible(chromedp.CSS(execLink)),
		chromedp.KeyEvent("\t"),
		poll(`document.activeElement && document.activeElement.classList.contains('skip')`),
		poll(`[...document.querySelectorAll('a[href], button, input, select')].every(e => e.tabIndex >= 0)`))

	// The page's headers: its own scripts only, nothing may frame it.
	resp, err := http.Get(s.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("console: %s", p)
	}
	t.Logf("screenshots in %s", out)
}

// hasName reports whether the page has an event about name.
func hasName(p *airlock.EgressPage, name string) bool {
	for _, ev := range p.Events {
		if ev.Name == name {
			return true
		}
	}
	return false
}

// egressRow is a page condition: the egress table in box has a row about
// name with that verdict.
func egressRow(box, name, verdict string) string {
	return fmt.Sprintf(`[...document.querySelectorAll(%q)].some(r => r.textContent.includes(%q) && r.querySelector('.badge') && r.querySelector('.badge').textContent === %q)`,
		box+" tbody tr", name, verdict)
}
