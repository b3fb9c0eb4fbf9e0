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

const chartCode = `import matplotlib.pyplot as plt
plt.figure(figsize=(6,3))
plt.plot([1,2,3,4],[10,25,18,35],color="#3b82f6")
plt.title("Agent Performance")
plt.savefig("output.png")`

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
		MaxTimeout: 10 * time.Minute, // the ticking command runs while the browser looks, however slow the machine
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
			Shell: "i=0; while [ ! -e /tmp/stop ]; do i=$((i+1)); echo tick $i; sleep 0.2; done; echo stopped", TimeoutSec: 600})
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

	p := newPage(t)
	shot, step, bctx := p.shot, p.step, p.ctx
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
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") ||
		!strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "require-trusted-types-for 'script'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
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
