package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// chromium is Debian's package, which scripts/setup.sh installs.
const chromium = "/usr/bin/chromium"

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

// page is a headless Chromium with one tab, and the test's helpers to
// drive it. Any console error or warning in the page (a script error, a
// failed request, a CSP violation) fails the test when it ends.
type page struct {
	t       *testing.T
	ctx     context.Context
	out     string
	mu      sync.Mutex
	console []string
	ignore  []string // console messages that are expected (the test's own 4xx)
}

// newPage starts Chromium, or skips when it is not installed.
func newPage(t *testing.T) *page {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		testreq.Skip(t, "Chromium is not installed at "+chromium+" (scripts/setup.sh installs Debian's chromium package)")
	}
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
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	p := &page{t: t, ctx: bctx, out: outputDir(t)}
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		p.mu.Lock()
		defer p.mu.Unlock()
	next:
		for _, m := range p.console {
			for _, ok := range p.ignore {
				if strings.Contains(m, ok) {
					continue next
				}
			}
			t.Errorf("console: %s", m)
		}
		t.Logf("screenshots in %s", p.out)
	})
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		t.Fatalf("start %s: %v", chromium, err)
	}
	messages := chromedp.Console(bctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() || m.Type == chromedp.ConsoleWarning {
				p.mu.Lock()
				p.console = append(p.console, fmt.Sprintf("%s %s:%d %s", m.Type, m.URL, m.Line+1, m))
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// expect marks console messages holding s as expected (the browser logs
// every 4xx answer the test provokes on purpose).
func (p *page) expect(s string) {
	p.mu.Lock()
	p.ignore = append(p.ignore, s)
	p.mu.Unlock()
}

// shot saves a full-page screenshot under the output directory.
func (p *page) shot(name string) {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(p.out, name), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// step runs actions, failing the test with what if they fail.
func (p *page) step(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	sctx, cancel := context.WithTimeout(p.ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		// What the page showed, for the one who reads the failure.
		name := "failed-" + strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			return '-'
		}, strings.ToLower(what)) + ".png"
		if png, serr := chromedp.Run(p.ctx, chromedp.FullScreenshot(100)); serr == nil {
			os.WriteFile(filepath.Join(p.out, name), png, 0o644)
		}
		p.t.Fatalf("%s: %v (the page: %s)", what, err, filepath.Join(p.out, name))
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// poll waits until a JavaScript expression is true.
func poll(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(80*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))
}

// hash moves the page to a route of the console.
func hash(h string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.hash = %q", h))(ctx, t)
		return err
	})
}

// setValue sets the value of the first element matching css (an input,
// a textarea or a select), as a user's choice would.
func setValue(css, v string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		ok, err := chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.value = %q; e.dispatchEvent(new Event('change', { bubbles: true })); return e.value === %q; })()`, css, v, v))(ctx, t)
		if err == nil && !ok {
			err = fmt.Errorf("could not set %s to %q", css, v)
		}
		return err
	})
}

// text is an expression: the text of the first element matching css, or
// "" when there is none.
func text(css string) string {
	return fmt.Sprintf(`((document.querySelector(%q) || {}).textContent || '')`, css)
}

// downloads sends the tab's downloads into a new directory and returns a
// function that waits for the next completed download and returns the
// name the page gave it and its bytes.
func (p *page) downloads() func() (string, []byte) {
	p.t.Helper()
	dir := p.t.TempDir()
	var mu sync.Mutex
	names := map[string]string{}
	done := make(chan string, 16)
	begin := chromedp.Events(p.ctx, browser.DownloadWillBegin)
	progress := chromedp.Events(p.ctx, browser.DownloadProgress)
	go func() {
		for ev, err := range begin {
			if err != nil {
				return
			}
			mu.Lock()
			names[ev.GUID] = ev.SuggestedFilename
			mu.Unlock()
		}
	}()
	go func() {
		for ev, err := range progress {
			if err != nil {
				return
			}
			if ev.State == browser.DownloadProgressStateCompleted {
				done <- ev.GUID
			}
		}
	}()
	events := true
	p.step("allow downloads", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Call(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior:      browser.SetDownloadBehaviorBehaviorAllowAndName,
			DownloadPath:  dir,
			EventsEnabled: &events,
		})
		return err
	}))
	return func() (string, []byte) {
		p.t.Helper()
		select {
		case guid := <-done:
			b, err := os.ReadFile(filepath.Join(dir, guid))
			if err != nil {
				p.t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			return names[guid], b
		case <-time.After(60 * time.Second):
			p.t.Fatal("no download completed in 60 s")
			return "", nil
		}
	}
}
