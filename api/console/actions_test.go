package console_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp/kb"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/console"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/quota"
	"github.com/airlockhq/airlock/service/watch"
)

// newActionStack is a node with the console beside the API, the tenants'
// quotas in a ledger (so GET /v1/usage answers) and watched sessions.
func newActionStack(t *testing.T) *teststack.Stack {
	return teststack.New(t, teststack.Options{
		MaxTimeout: 60 * time.Second,
		Quotas:     quota.Limits{quota.Sessions: 4, quota.ExecutionsPerMinute: 200, quota.Memory: 8 << 30},
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
			mux.Handle("/", api)
			return mux
		},
	})
}

// rawCall sends one request to the API with a key and returns the status
// and the decoded JSON answer (a problem document on failure).
func rawCall(t *testing.T, base, key, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// sessionFromHash is an expression: the session ID the page's route
// names, or "".
const sessionFromHash = `(location.hash.match(/^#\/sessions\/([^/?]+)$/) || [])[1] || ''`

// TestConsoleActions drives a tenant's actions through the console in
// headless Chromium, each checked in the page's DOM and through the API:
// a refused session creation shows the API's problem title and detail;
// a session is created, runs shell and Python cells (output with
// <script> shown as text), takes an upload and gives a download, takes a
// snapshot, pauses (state paused, files kept), resumes (the files are
// there), forks (the fork has them too), and ends (end reason deleted); the snapshot is restored into a
// new session with the same files and deleted; usage shows the quotas;
// events page through abuse events and the feed shows the session's
// events (created, ended for the reason deleted); a key
// is created (its secret shown once, stored nowhere) and revoked; the key
// a tab signed in with, revoked from that tab, signs it out; another
// tenant's key sees none of it. Screenshots at 1280 and 390 pixels wide.
func TestConsoleActions(t *testing.T) {
	s := newActionStack(t)
	a := s.NewTenant(t, "actions-a")
	b := s.NewTenant(t, "actions-b")
	ctx := context.Background()
	var cleanup []string // sessions to end if the test stops early
	defer func() {
		for _, id := range cleanup {
			a.Client.DeleteSession(ctx, id)
		}
	}()

	// Abuse events to page through (the page shows 50), one with markup
	// in its summary.
	for i := 0; i < 53; i++ {
		ev := &airlock.AbuseEvent{TenantID: a.ID, Detector: "scanning", Action: "kill",
			Summary: fmt.Sprintf("event %02d <img src=x id=pwn>", i), Evidence: map[string]any{"ports": i},
			Time: time.Now().Add(time.Duration(i-60) * time.Second)}
		if err := s.Store.RecordAbuseEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}

	p := newPage(t)
	// The test's own refusals (a bad image, the other tenant's reads, the
	// revoked keys) are logged by the browser as failed loads.
	p.expect("status of 4")
	// xterm.js injects its theme as <style> elements; the console's CSP
	// (style-src 'self', kept) refuses them, and app.css stands in.
	p.expect("Applying inline style violates the following Content Security Policy directive 'style-src 'self''")
	get := p.downloads()
	token := make([]byte, 8)
	rand.Read(token)
	tok := hex.EncodeToString(token)

	p.step("sign in", chromedp.Navigate(s.URL+"/console/#/sessions"),
		chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), a.Key+"\r"),
		poll(`location.hash === '#/executions'`),
		hash("#/sessions"),
		chromedp.WaitVisible(chromedp.CSS("#new-session")))

	// A creation the API refuses: the form shows the problem's title and
	// detail, the ones the API gives for the same request.
	status, prob := rawCall(t, s.URL, a.Key, http.MethodPost, "/v1/sessions", map[string]any{"image": "no-such-image"})
	if status < 400 || status >= 500 || prob["title"] == nil || prob["detail"] == nil {
		t.Fatalf("the API's answer to an unknown image: %d %v", status, prob)
	}
	p.step("a refused creation",
		chromedp.SendKeys(chromedp.CSS("#image"), "no-such-image"),
		chromedp.Click(chromedp.CSS("#new-session button[type=submit]")),
		poll(fmt.Sprintf(`%s === %q && %s.includes(%q)`, text("#new-session-error .problem-title"), prob["title"],
			text("#new-session-error .problem-detail"), prob["detail"])))
	p.shot("session-create-problem-1280.png")

	// Create: small, the default image.
	p.step("create a session",
		setValue("#image", ""),
		setValue("#size", "small"),
		chromedp.Click(chromedp.CSS("#new-session button[type=submit]")),
		poll(sessionFromHash+` !== '' && `+text("#session-state")+` === 'ready'`),
		poll(text("#files")+`.includes('/workspace')`))
	id := eval[string](p, sessionFromHash)
	cleanup = append(cleanup, id)
	// The resource chart: four SVG charts once the first sample is in.
	p.step("the session's resource charts",
		poll(`document.querySelectorAll('#metrics svg.metric-chart').length === 4 && `+text("#metrics")+`.includes('Memory (MiB): now')`))
	if got, err := a.Client.Session(ctx, id); err != nil || got.State != airlock.SessionReady || got.Size != airlock.SizeSmall {
		t.Fatalf("the session the console made: %v %+v", err, got)
	}

	// A shell cell: markup in stdout is text, stderr and the exit code
	// are shown; it also writes a file to download later.
	markup := `<script>window.pwned=1</script><b id="bold">bold</b>`
	p.step("run a shell cell",
		setValue("#language", "shell"),
		chromedp.SendKeys(chromedp.CSS("#code"), fmt.Sprintf("echo '%s'; echo oops >&2; printf 'made-%s' > made.txt; exit 3", markup, tok)),
		chromedp.Click(chromedp.CSS("#run")),
		poll(text("#cells .cell .exit-code")+` === '3'`))
	if got := eval[string](p, text("#cells .cell pre.stdout")); got != markup+"\n" {
		t.Errorf("stdout shown as %q, want %q", got, markup+"\n")
	}
	if got := eval[string](p, text("#cells .cell pre.stderr")); got != "oops\n" {
		t.Errorf("stderr shown as %q", got)
	}
	if eval[bool](p, `document.querySelector('#cells script, #cells b, #bold') !== null || window.pwned !== undefined`) {
		t.Error("the output became HTML")
	}
	// Two Python cells: the second sees the first's variable.
	p.step("run Python cells",
		setValue("#language", "python"),
		setValue("#code", "x = 6 * 7\nprint('x is', x)"),
		chromedp.Click(chromedp.CSS("#run")),
		poll(text("#cells .cell pre.stdout")+` === 'x is 42\n'`),
		setValue("#code", "print(x + 1)"),
		chromedp.Click(chromedp.CSS("#run")),
		poll(text("#cells .cell pre.stdout")+` === '43\n' && document.querySelectorAll('#cells .cell').length === 3`))
	p.shot("session-cells-1280.png")

	// The terminal: typed into through xterm.js, its output drawn; the
	// command's output (not the echo of what was typed) shows it ran.
	// Ending it closes the WebSocket with the shell's exit.
	p.step("type into the terminal",
		chromedp.Click(chromedp.CSS("#terminal-open")),
		poll(text("#terminal-state")+`.startsWith('Terminal ')`),
		chromedp.Focus(chromedp.CSS("#terminal textarea.xterm-helper-textarea")),
		insertText("echo term-$((6*7))"),
		chromedp.KeyEvent(kb.Enter),
		poll(`(document.querySelector('#terminal .xterm-rows')?.textContent || '').includes('term-42')`))
	p.shot("session-terminal-1280.png")
	p.step("end the terminal",
		chromedp.Click(chromedp.CSS("#terminal-end")),
		poll(text("#terminal-state")+`.includes('The terminal closed: exit')`))

	// Upload a file from this computer; download the one the code made.
	local := filepath.Join(t.TempDir(), "hello.txt")
	upload := "uploaded " + tok + "\n"
	if err := os.WriteFile(local, []byte(upload), 0o644); err != nil {
		t.Fatal(err)
	}
	p.step("upload a file",
		chromedp.SetUploadFiles(chromedp.CSS("#upload-file"), []string{local}),
		chromedp.Click(chromedp.CSS("#upload")),
		poll(`document.querySelector('#files [data-file="hello.txt"]') !== null`))
	var buf bytes.Buffer
	if _, err := a.Client.GetFile(ctx, id, "hello.txt", &buf); err != nil || buf.String() != upload {
		t.Fatalf("the uploaded file through the API: %v %q", err, buf.String())
	}
	p.step("download a file", chromedp.Click(chromedp.CSS(`#files [data-file="made.txt"]`)))
	if name, got := get(); name != "made.txt" || string(got) != "made-"+tok {
		t.Errorf("downloaded %q: %q, want made.txt: %q", name, got, "made-"+tok)
	}

	// A snapshot, named.
	p.step("take a snapshot",
		chromedp.SendKeys(chromedp.CSS("#snapshot-name"), "first <snap>"),
		chromedp.Click(chromedp.CSS("#snapshot")),
		poll(text("#session-result")+`.includes('saved')`))
	snaps, err := a.Client.ListSnapshots(ctx, "", 10)
	if err != nil || len(snaps.Snapshots) != 1 || snaps.Snapshots[0].Name != "first <snap>" || snaps.Snapshots[0].SessionID != id {
		t.Fatalf("snapshots after the console took one: %v %+v", err, snaps)
	}
	snap := snaps.Snapshots[0].ID

	// Pause: the state is paused and the page says the files are kept.
	p.step("pause", chromedp.Click(chromedp.CSS("#pause")),
		poll(text("#session-state")+` === 'paused'`),
		poll(text("#state-note")+`.includes('files and processes are kept')`))
	if eval[bool](p, `document.body.textContent.includes('files are gone')`) {
		t.Error("a paused session is shown as if its files were gone")
	}
	if got, err := a.Client.Session(ctx, id); err != nil || got.State != airlock.SessionPaused {
		t.Fatalf("after pause in the console: %v %+v", err, got)
	}
	p.shot("session-paused-1280.png")
	p.step("the list shows it paused", hash("#/sessions"),
		poll(fmt.Sprintf(`[...document.querySelectorAll('tbody tr')].some(r => r.textContent.includes(%q) && r.querySelector('.badge').textContent === 'paused')`, id)))

	// Resume: ready again, with its files.
	p.step("resume", hash("#/sessions/"+id), chromedp.WaitVisible(chromedp.CSS("#resume")),
		chromedp.Click(chromedp.CSS("#resume")),
		poll(text("#session-state")+` === 'ready'`),
		poll(`document.querySelector('#files [data-file="hello.txt"]') !== null && document.querySelector('#files [data-file="made.txt"]') !== null`))

	// Fork: a new session with a copy of the workspace.
	p.step("fork", chromedp.Click(chromedp.CSS("#fork")), poll(`document.querySelector('#session-result a.fork') !== null`))
	forked := eval[string](p, text("#session-result a.fork"))
	cleanup = append(cleanup, forked)
	buf.Reset()
	if _, err := a.Client.GetFile(ctx, forked, "hello.txt", &buf); err != nil || buf.String() != upload || forked == id {
		t.Fatalf("the fork %s: %v %q", forked, err, buf.String())
	}
	if _, err := a.Client.DeleteSession(ctx, forked); err != nil {
		t.Fatal(err)
	}

	// End, after the confirmation: destroyed, for the reason deleted.
	p.step("end", chromedp.Click(chromedp.CSS("#end")),
		chromedp.WaitVisible(chromedp.CSS(`#session-actions [data-confirm="yes"]`)),
		chromedp.Click(chromedp.CSS(`#session-actions [data-confirm="yes"]`)),
		poll(text("#session-state")+` === 'destroyed' && `+text("#end-reason")+` === 'deleted'`),
		poll(text("#state-note")+`.includes('files are gone')`))
	if got, err := a.Client.Session(ctx, id); err != nil || got.State != airlock.SessionDestroyed || got.EndReason != airlock.EndDeleted {
		t.Fatalf("after end in the console: %v %+v", err, got)
	}
	p.shot("session-ended-1280.png")

	// The snapshot: restored into a new session with the same files, then
	// deleted.
	p.step("restore the snapshot", hash("#/snapshots"),
		poll(fmt.Sprintf(`document.querySelector('tr[data-snapshot=%q]') !== null && %s.includes('first <snap>')`, snap, text("tbody"))))
	p.shot("snapshots-1280.png")
	p.step("restore", chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-restore=%q]`, snap))),
		poll(sessionFromHash+` !== '' && `+sessionFromHash+fmt.Sprintf(` !== %q`, id)+` && `+text("#session-state")+` === 'ready'`),
		poll(`document.querySelector('#files [data-file="hello.txt"]') !== null`))
	restored := eval[string](p, sessionFromHash)
	cleanup = append(cleanup, restored)
	buf.Reset()
	if _, err := a.Client.GetFile(ctx, restored, "made.txt", &buf); err != nil || buf.String() != "made-"+tok {
		t.Fatalf("the restored session's file: %v %q", err, buf.String())
	}
	if _, err := a.Client.DeleteSession(ctx, restored); err != nil {
		t.Fatal(err)
	}
	p.step("delete the snapshot", hash("#/snapshots"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-delete=%q]`, snap))),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-delete=%q]`, snap))),
		chromedp.Click(chromedp.CSS(`[data-confirm="yes"]`)),
		poll(`document.getElementById('no-snapshots') !== null`))
	if _, err := a.Client.Snapshot(ctx, snap); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("the deleted snapshot through the API: %v", err)
	}

	// Usage: every quota the API reports, with the limits set here.
	u, err := a.Client.Usage(ctx)
	if err != nil || len(u.Quotas) == 0 {
		t.Fatalf("usage: %v %+v", err, u)
	}
	p.step("usage", hash("#/usage"),
		poll(fmt.Sprintf(`document.querySelectorAll('tr[data-quota]').length === %d`, len(u.Quotas))),
		poll(text(`tr[data-quota="sessions"] .limit`)+` === '4 sessions'`),
		poll(text(`tr[data-quota="executions_per_minute"] .limit`)+` === '200 executions'`))
	p.shot("usage-1280.png")

	// Events: 50 abuse events, then the older 3; the feed has the
	// session's events (created, ended and why).
	p.step("events", hash("#/events"),
		poll(`document.querySelectorAll('tr[data-event]').length === 50`),
		poll(fmt.Sprintf(`[...document.querySelectorAll('tr[data-feed-event][data-type="session.ended"]')].some(r => r.textContent.includes(%q) && r.textContent.includes('deleted'))`, id)),
		poll(fmt.Sprintf(`[...document.querySelectorAll('tr[data-feed-event][data-type="session.created"]')].some(r => r.textContent.includes(%q) && r.querySelector('.badge').textContent === 'session.created')`, id)))
	if eval[bool](p, `document.getElementById('pwn') !== null || !document.body.textContent.includes('event 52 <img src=x id=pwn>')`) {
		t.Error("an abuse event's summary was not shown as text")
	}
	p.shot("events-1280.png")
	p.step("older events", chromedp.Click(chromedp.CSS(`a[href^="#/events?before="]`)),
		poll(`document.querySelectorAll('tr[data-event]').length === 3 && document.body.textContent.includes('event 00 ')`))

	// Keys: create one; its secret is shown once and stored nowhere.
	p.step("create a key", hash("#/keys"),
		chromedp.WaitVisible(chromedp.CSS("#key-name")),
		chromedp.SendKeys(chromedp.CSS("#key-name"), "ci"),
		chromedp.Click(chromedp.CSS("#create-key button[type=submit]")),
		poll(`(document.getElementById('new-key-secret') || {}).value > ''`))
	secret := eval[string](p, `document.getElementById('new-key-secret').value`)
	p.shot("keys-created-1280.png")
	if code, _ := rawCall(t, s.URL, secret, http.MethodGet, "/v1/usage", nil); code != http.StatusOK {
		t.Fatalf("the new key: %d", code)
	}
	stored := eval[string](p, `JSON.stringify([location.href, document.cookie, localStorage.length, Object.keys(sessionStorage), Object.values(sessionStorage)])`)
	if strings.Contains(stored, secret) || !strings.Contains(stored, `,0,["airlock.console.key"],`) {
		t.Errorf("what the page keeps: %s", stored)
	}
	if strings.Count(stored, a.Key) != 1 || strings.Contains(eval[string](p, `location.href`), a.Key) {
		t.Errorf("the signed-in key is kept elsewhere than session storage: %s", stored)
	}
	keyID := eval[string](p, `[...document.querySelectorAll('tr[data-key]')].find(r => r.querySelector('td').textContent === 'ci').dataset.key`)
	// Leaving the page drops the secret: it is not shown again.
	p.step("the secret is shown once", hash("#/usage"), chromedp.WaitVisible(chromedp.CSS("tr[data-quota]")),
		hash("#/keys"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-key=%q]`, keyID))))
	if eval[bool](p, fmt.Sprintf(`document.body.innerText.includes(%q) || document.getElementById('new-key-secret') !== null`, secret)) {
		t.Error("the secret is shown again")
	}
	p.step("revoke it", chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-revoke=%q]`, keyID))),
		chromedp.Click(chromedp.CSS(`[data-confirm="yes"]`)),
		poll(fmt.Sprintf(`%s === 'revoked'`, text(fmt.Sprintf(`tr[data-key=%q] .badge`, keyID)))))
	if code, _ := rawCall(t, s.URL, secret, http.MethodGet, "/v1/usage", nil); code != http.StatusUnauthorized {
		t.Errorf("the revoked key: %d, want 401", code)
	}
	p.shot("keys-revoked-1280.png")

	// Narrow screens: nothing wider than the screen but the tables.
	for _, route := range []string{"#/sessions/" + id, "#/usage", "#/keys", "#/events", "#/snapshots", "#/sessions"} {
		p.step("open "+route+" at 390", chromedp.EmulateViewport(390, 900), hash(route), poll(`document.querySelector('main h1') && !document.querySelector('main').textContent.includes('Loading…')`))
		if w := eval[int](p, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("page width of %s at 390: %d", route, w)
		}
		name := strings.Trim(strings.NewReplacer("#/", "", "/", "-").Replace(route), "-")
		if strings.HasPrefix(name, "sessions-") {
			name = "session-ended" // the first test saves session-390.png, of a live one
		}
		p.shot(name + "-390.png")
	}
	p.step("back to 1280", chromedp.EmulateViewport(1280, 900))

	// A revoked key at sign in is refused; the key this tab signed in
	// with, revoked from this tab, signs it out.
	secret2, k2 := airlock.NewAPIKey(a.ID, "", time.Now())
	k2.Name = "this-tab"
	if err := s.Store.CreateAPIKey(ctx, k2); err != nil {
		t.Fatal(err)
	}
	p.step("sign out and in with a revoked key", chromedp.Click(chromedp.CSS("#signout")),
		chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), secret+"\r"),
		poll(text("#signin-error")+` === 'That key was refused.'`))
	p.step("sign in with another key", setValue("#key", ""),
		chromedp.SendKeys(chromedp.CSS("#key"), secret2+"\r"),
		poll(`location.hash === '#/executions'`),
		hash("#/keys"),
		poll(fmt.Sprintf(`%s.includes('(this tab)')`, text(fmt.Sprintf(`tr[data-key=%q]`, k2.ID)))),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-revoke=%q]`, k2.ID))),
		chromedp.Click(chromedp.CSS(`[data-confirm="yes"]`)),
		poll(`document.getElementById('key') !== null && `+text("#signin-error")+`.includes('refused')`))
	if eval[int](p, `sessionStorage.length + localStorage.length`) != 0 {
		t.Error("the refused key is still stored")
	}

	// Another tenant's key sees none of it: not the session, not its
	// snapshots, not its keys.
	p.step("sign in as another tenant", chromedp.SendKeys(chromedp.CSS("#key"), b.Key+"\r"),
		poll(`location.hash === '#/executions'`),
		hash("#/sessions/"+id),
		poll(`document.querySelector('main .problem[data-status="404"]') !== null`))
	p.shot("other-tenant-1280.png")
	p.step("its lists", hash("#/sessions?all=1"), poll(`document.getElementById('no-sessions') !== null`),
		hash("#/snapshots"), poll(`document.getElementById('no-snapshots') !== null`),
		hash("#/events"), poll(`document.getElementById('no-abuse') !== null`),
		hash("#/keys"), poll(`document.querySelectorAll('tr[data-key]').length === 1`))
	if strings.Contains(eval[string](p, `document.body.textContent`), "this-tab") {
		t.Error("another tenant's keys are listed")
	}
}

// insertText types text into the focused element as an input method
// inserts it (Input.insertText: an input event, no key events, which
// xterm.js would read as well as the character).
func insertText(s string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: s})
		return err
	})
}
