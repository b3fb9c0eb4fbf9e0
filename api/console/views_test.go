package console_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/console"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/node"
	"github.com/airlockhq/airlock/service/quota"
	"github.com/airlockhq/airlock/service/watch"
	"github.com/airlockhq/airlock/service/webhook"
)

// newViewStack is a node with the console beside the API, watched
// sessions, templates on (built with the test's agent), volumes under a
// quota, and webhooks that may reach the test's loopback receiver,
// polled and retried fast.
func newViewStack(t *testing.T) *teststack.Stack {
	return teststack.New(t, teststack.Options{
		MaxTimeout: 5 * time.Minute,
		Quotas:     quota.Limits{quota.Sessions: 4, quota.VolumeBytes: 256 << 20},
		Templates:  &node.TemplatesConfig{},
		WrapSessions: func(svc airlock.SessionService) airlock.SessionService {
			w, err := watch.New(watch.Config{Sessions: svc})
			if err != nil {
				t.Fatal(err)
			}
			return w
		},
		Node: func(c *node.Config) {
			c.Webhooks.AllowPrivate = true
			c.Webhooks.Interval = 100 * time.Millisecond
			c.Webhooks.RetrySchedule = []time.Duration{200 * time.Millisecond}
		},
		Serve: func(_ *teststack.Stack, api http.Handler) http.Handler {
			mux := http.NewServeMux()
			mux.Handle(console.Prefix, console.Handler())
			mux.Handle("/", api)
			return mux
		},
	})
}

// hookReceiver is a loopback webhook receiver: it checks each request's
// signature with the secret the console showed, fails the first good
// one (500) and takes the rest (204).
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	secret []byte
	good   int
	bad    []string
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := webhook.Verify(req.Header.Get(webhook.SignatureHeader), r.secret, body, time.Now(), time.Minute); err != nil {
			r.bad = append(r.bad, fmt.Sprintf("%s: %v", req.Header.Get(webhook.SignatureHeader), err))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		r.good++
		if r.good == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

// contextTar is a build context: hello.txt.
func contextTar(t *testing.T, hello string) string {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "hello.txt", Mode: 0o644, Size: int64(len(hello)), Typeflag: tar.TypeReg})
	tw.Write([]byte(hello))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "context.tar")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// markupCheck is a page condition: none of the markup the test puts
// where the API returns text of others' choosing became an element, and
// no script of it ran.
const markupCheck = `document.querySelector('#pwnlog, svg[onload], #pwnevent, #pwnsid, #pwnreason') === null && window.pwned === undefined`

// TestConsoleTemplatesVolumesEventsWebhooks drives the console's views of
// templates, volumes, the event feed and webhooks in headless Chromium
// against a real node: a webhook created from the form (event types
// ticked) shows its signing secret once, which the copy button puts on
// the clipboard and which signs the deliveries the test's receiver
// checks; a template built from a pasted Dockerfile and an uploaded
// context streams its log (markup in it shown as text) until it is
// ready; a session started from it by the page's button; deleting the
// template while that session lives shows the 409; an import with a bad
// image reference shows the 400; a volume created from the form, used by
// a session, refuses deletion (409) until the session ends, then goes;
// the feed shows the sessions' events newest first, linked to them,
// filters by session, and loads older events; the webhook's delivery log
// shows a delivery retried once (500, then delivered: 2 tries) and
// replays it. Another tenant's template, volume and webhook are never
// listed, and its own key sees only its own. Every page again at 390
// pixels wide.
func TestConsoleTemplatesVolumesEventsWebhooks(t *testing.T) {
	s := newViewStack(t)
	a := s.NewTenant(t, "views-a")
	b := s.NewTenant(t, "views-b")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var cleanup []string
	defer func() {
		for _, id := range cleanup {
			a.Client.DeleteSession(context.Background(), id)
		}
	}()

	// The other tenant's template, volume and webhook.
	if err := s.Store.CreateTemplate(ctx, &airlock.Template{TenantID: b.ID, Name: "b-template", Status: airlock.TemplateFailed,
		Source: airlock.TemplateFromDockerfile, Reason: "b's own"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Client.CreateVolume(ctx, airlock.CreateVolumeRequest{Name: "b-volume", SizeMiB: 16}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Client.CreateWebhook(ctx, airlock.CreateWebhookRequest{URL: "http://127.0.0.1:9/b-hook"}); err != nil {
		t.Fatal(err)
	}
	// Older events for the feed to load: more than a page, before any
	// of the sessions'.
	for i := 0; i < 52; i++ {
		if err := s.Store.RecordEvent(ctx, &airlock.Event{Type: airlock.EventSessionResumed, TenantID: a.ID, SessionID: "old-session", Reason: "request", Detail: fmt.Sprintf("old %02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// A failed template of a's whose reason holds markup.
	if err := s.Store.CreateTemplate(ctx, &airlock.Template{TenantID: a.ID, Name: "broken", Status: airlock.TemplateFailed,
		Source: airlock.TemplateFromDockerfile, Reason: `<img src=x id=pwnreason onerror="window.pwned=1">`, FailedLine: 2}); err != nil {
		t.Fatal(err)
	}

	p := newPage(t)
	p.expect("status of 4") // the 409s and the 400 the test provokes
	rcv := newHookReceiver(t)

	p.step("sign in", chromedp.Navigate(s.URL+"/console/"),
		chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), a.Key+"\r"),
		poll(`location.hash === '#/executions'`))

	// ---- webhooks: create one; its secret shown once, copied.
	p.step("allow the clipboard", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, name := range []string{"clipboard-read", "clipboard-write"} {
			if _, err := chromedp.Call(ctx, browser.SetPermission, browser.SetPermissionParams{
				Permission: &browser.PermissionDescriptor{Name: name}, Setting: browser.PermissionSettingGranted,
			}); err != nil {
				return err
			}
		}
		return nil
	}))
	hookURL := rcv.URL + `/hook?x=<svg/onload=window.pwned=1>`
	p.step("create a webhook", hash("#/webhooks"),
		chromedp.WaitVisible(chromedp.CSS("#webhook-url")),
		poll(`document.getElementById('no-webhooks') !== null`),
		chromedp.SendKeys(chromedp.CSS("#webhook-url"), hookURL),
		chromedp.Click(chromedp.CSS(`input[name=events][value="session.created"]`)),
		chromedp.Click(chromedp.CSS(`input[name=events][value="session.ended"]`)),
		chromedp.Click(chromedp.CSS("#create-webhook button[type=submit]")),
		poll(`(document.getElementById('new-webhook-secret') || {}).value > ''`))
	secret := eval[string](p, `document.getElementById('new-webhook-secret').value`)
	rcv.mu.Lock()
	rcv.secret = []byte(secret)
	rcv.mu.Unlock()
	hooks, err := a.Client.ListWebhooks(ctx)
	if err != nil || len(hooks) != 1 || hooks[0].URL != hookURL || fmt.Sprint(hooks[0].Events) != "[session.created session.ended]" {
		t.Fatalf("the webhook the console made: %v %+v", err, hooks)
	}
	hookID := hooks[0].ID
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the secret shown: %q", secret)
	}
	p.step("copy the secret", chromedp.Click(chromedp.CSS("#new-webhook-secret-copy")),
		poll(text("#new-webhook-secret-copied")+` === 'Copied.'`),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](`navigator.clipboard.readText().then(t => { window.clip = t; }, e => { window.clip = 'error: ' + e; }), true`)(ctx, t)
			return err
		}),
		poll(`window.clip !== undefined`))
	if got := eval[string](p, `window.clip`); got != secret {
		t.Errorf("the clipboard holds %q, want the secret", got)
	}
	if !eval[bool](p, fmt.Sprintf(`%s.includes(%q) && %s`, text(fmt.Sprintf(`tr[data-webhook=%q]`, hookID)), hookURL, markupCheck)) {
		t.Error("the webhook's URL is not shown as text")
	}
	p.shot("webhooks-created-1280.png")
	p.step("the secret is shown once", hash("#/volumes"), chromedp.WaitVisible(chromedp.CSS("#create-volume")),
		hash("#/webhooks"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-webhook=%q]`, hookID))))
	if eval[bool](p, fmt.Sprintf(`document.body.innerText.includes(%q) || document.getElementById('new-webhook-secret') !== null`, secret)) {
		t.Error("the secret is shown again")
	}

	// ---- templates: build from a Dockerfile with a context; the log
	// streams until it is ready.
	tarPath := contextTar(t, "hello from the context\n")
	dockerfile := "FROM base\nCOPY hello.txt /opt/hello.txt\nRUN cat /opt/hello.txt; echo '<b id=\"pwnlog\">bold</b>'; for i in 1 2 3; do echo step-$i; done\n"
	p.step("build a template", hash("#/templates"),
		chromedp.WaitVisible(chromedp.CSS("#build-name")),
		poll(fmt.Sprintf(`document.querySelector('tr[data-template="broken"]') !== null && %s.includes('failed')`, text(`tr[data-template="broken"]`))),
		chromedp.SendKeys(chromedp.CSS("#build-name"), "tools"),
		setValue("#build-dockerfile", dockerfile),
		chromedp.SetUploadFiles(chromedp.CSS("#build-context"), []string{tarPath}),
		chromedp.Click(chromedp.CSS("#build-template button[type=submit]")),
		poll(`location.hash === '#/templates/tools'`))
	// The page reads the log while the build runs, and the same stream
	// ends with the build; the page is not loaded again.
	p.step("the build under way", poll(text("#template-log-state")+`.startsWith('Building')`),
		chromedp.Evaluate[chromedp.Void](`window.samePage = true`))
	testreq.Eventually(t, 10*time.Minute, "the template to build", func() bool {
		tpl, err := a.Client.Template(ctx, "tools")
		return err == nil && tpl.Status != airlock.TemplateBuilding
	})
	p.step("watch its log", poll(text("#template-log")+`.includes('step-3')`),
		poll(text("#template-status")+` === 'ready'`),
		poll(text("#template-log-state")+`.startsWith('The build is over: ready')`),
		poll(`window.samePage === true`))
	logText := eval[string](p, text("#template-log"))
	if !strings.Contains(logText, "hello from the context") || !strings.Contains(logText, `<b id="pwnlog">bold</b>`) || !eval[bool](p, markupCheck) {
		t.Errorf("the build log shown: %q", logText)
	}
	p.shot("template-built-1280.png")
	tpl, err := a.Client.Template(ctx, "tools")
	if err != nil || tpl.Status != airlock.TemplateReady || tpl.Source != airlock.TemplateFromDockerfile || tpl.ContextID == "" {
		t.Fatalf("the template the console built: %v %+v", err, tpl)
	}

	// A session from it, by the page's button.
	p.step("start a session from the template", chromedp.Click(chromedp.CSS("#template-start")))
	testreq.Eventually(t, 5*time.Minute, "the session from the template", func() bool {
		page, err := a.Client.ListSessions(ctx, client.ListSessionsOptions{LiveOnly: true})
		return err == nil && len(page.Sessions) == 1 && page.Sessions[0].State == airlock.SessionReady
	})
	p.step("its page", poll(sessionFromHash+` !== '' && `+text("#session-state")+` === 'ready'`))
	fromTpl := eval[string](p, sessionFromHash)
	cleanup = append(cleanup, fromTpl)
	if e, err := a.Client.Exec(ctx, fromTpl, airlock.SessionExecRequest{Shell: "cat /opt/hello.txt"}); err != nil || e.Stdout != "hello from the context\n" {
		t.Fatalf("the session from the template: %v %+v", err, e)
	}
	// Deleting the template while the session uses it: the 409 is shown.
	p.step("delete the template in use", hash("#/templates/tools"),
		chromedp.WaitVisible(chromedp.CSS(`[data-delete-template="tools"]`)),
		chromedp.Click(chromedp.CSS(`[data-delete-template="tools"]`)),
		chromedp.Click(chromedp.CSS(`#template-actions [data-confirm="yes"]`)),
		poll(`document.querySelector('#template-error .problem[data-status="409"][data-type$="template-in-use"]') !== null`))
	p.shot("template-in-use-1280.png")
	// The failed one: its reason as text.
	p.step("the failed template", hash("#/templates/broken"),
		poll(text("#template-reason")+` === '<img src=x id=pwnreason onerror="window.pwned=1">'`),
		poll(text("#template-log-state")+`.startsWith('The build is over: failed')`))
	if !eval[bool](p, markupCheck+` && document.getElementById('template-start').disabled`) {
		t.Error("the failed template's reason became HTML, or it can start a session")
	}
	// An import the API refuses: its problem is shown.
	p.step("a refused import", hash("#/templates"),
		chromedp.WaitVisible(chromedp.CSS("#import-name")),
		chromedp.SendKeys(chromedp.CSS("#import-name"), "imported"),
		setValue("#import-ref", "not a reference"),
		chromedp.Click(chromedp.CSS("#import-template button[type=submit]")),
		poll(`document.querySelector('#import-error .problem[data-status="400"]') !== null`))

	// ---- volumes: create from the form; in use, deletion is refused.
	p.step("create a volume", hash("#/volumes"),
		chromedp.WaitVisible(chromedp.CSS("#volume-name")),
		chromedp.SendKeys(chromedp.CSS("#volume-name"), "data"),
		setValue("#volume-size", "32"),
		chromedp.Click(chromedp.CSS("#create-volume button[type=submit]")),
		poll(fmt.Sprintf(`%s.includes('32.0 MiB') && %s.includes('no session')`, text(`tr[data-volume="data"]`), text(`tr[data-volume="data"]`))))
	if v, err := a.Client.Volume(ctx, "data"); err != nil || v.SizeMiB != 32 {
		t.Fatalf("the volume the console made: %v %+v", err, v)
	}
	withVol, _, err := a.Client.CreateSession(ctx, airlock.CreateSessionRequest{TimeoutS: 300, Volumes: []airlock.VolumeMount{{Name: "data", Path: "/mnt"}}})
	if err != nil {
		t.Fatal(err)
	}
	cleanup = append(cleanup, withVol.ID)
	p.step("the volume in use", hash("#/templates"), chromedp.WaitVisible(chromedp.CSS("#build-name")), hash("#/volumes"),
		poll(fmt.Sprintf(`document.querySelector('tr[data-volume="data"] .used-by a[href="#/sessions/%s"]') !== null && %s.includes('at /mnt')`, withVol.ID, text(`tr[data-volume="data"]`))),
		chromedp.Click(chromedp.CSS(`[data-delete-volume="data"]`)),
		chromedp.Click(chromedp.CSS(`tr[data-volume="data"] [data-confirm="yes"]`)),
		poll(`document.querySelector('#volumes-error .problem[data-status="409"][data-type$="volume-in-use"]') !== null`))
	p.shot("volumes-in-use-1280.png")
	if _, err := a.Client.DeleteSession(ctx, withVol.ID); err != nil {
		t.Fatal(err)
	}
	p.step("delete the volume", hash("#/templates"), chromedp.WaitVisible(chromedp.CSS("#build-name")), hash("#/volumes"),
		poll(text(`tr[data-volume="data"]`)+`.includes('no session')`),
		chromedp.Click(chromedp.CSS(`[data-delete-volume="data"]`)),
		chromedp.Click(chromedp.CSS(`tr[data-volume="data"] [data-confirm="yes"]`)),
		poll(`document.getElementById('no-volumes') !== null`))
	if _, err := a.Client.Volume(ctx, "data"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("the deleted volume through the API: %v", err)
	}

	// The template, once its session has ended, is deleted.
	if _, err := a.Client.DeleteSession(ctx, fromTpl); err != nil {
		t.Fatal(err)
	}
	p.step("delete the template", hash("#/templates/tools"),
		chromedp.WaitVisible(chromedp.CSS(`[data-delete-template="tools"]`)),
		chromedp.Click(chromedp.CSS(`[data-delete-template="tools"]`)),
		chromedp.Click(chromedp.CSS(`#template-actions [data-confirm="yes"]`)),
		poll(`location.hash === '#/templates' && document.querySelector('tr[data-template="tools"]') === null && document.querySelector('tr[data-template="broken"]') !== null`))
	if _, err := a.Client.Template(ctx, "tools"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("the deleted template through the API: %v", err)
	}

	// ---- events: the feed, newest first, linked to the sessions.
	testreq.Eventually(t, 30*time.Second, "both sessions' ended events", func() bool {
		page, err := a.Client.Events(ctx, "", 500)
		if err != nil {
			return false
		}
		ended := 0
		for _, ev := range page.Events {
			if ev.Type == airlock.EventSessionEnded && (ev.SessionID == fromTpl || ev.SessionID == withVol.ID) {
				ended++
			}
		}
		return ended == 2
	})
	// The newest event: its fields hold markup.
	if err := s.Store.RecordEvent(ctx, &airlock.Event{Type: airlock.EventSessionPaused, TenantID: a.ID, SessionID: `<b id="pwnsid">s</b>`, Reason: "request",
		Detail: `<img src=x id=pwnevent onerror="window.pwned=1">`}); err != nil {
		t.Fatal(err)
	}
	all, err := a.Client.Events(ctx, "", 500)
	if err != nil || len(all.Events) <= 50 {
		t.Fatalf("the feed through the API: %v %d events", err, len(all.Events))
	}
	feedRow := func(session, typ string) string {
		return fmt.Sprintf(`document.querySelector('tr[data-feed-event][data-type=%q] a[href="#/sessions/%s"]') !== null`, typ, session)
	}
	p.step("the event feed", hash("#/events"),
		poll(`document.querySelectorAll('tr[data-feed-event]').length === 50`),
		poll(feedRow(withVol.ID, airlock.EventSessionEnded)+` && `+feedRow(withVol.ID, airlock.EventSessionCreated)+` && `+feedRow(fromTpl, airlock.EventSessionEnded)),
		poll(`!document.getElementById('feed-more').hidden`))
	if !eval[bool](p, `document.querySelector('tr[data-feed-event]').dataset.type === 'session.paused' && `+markupCheck+` && `+
		text("tr[data-feed-event]")+`.includes('<img src=x id=pwnevent onerror="window.pwned=1">') && `+text("tr[data-feed-event]")+`.includes('<b id="pwnsid">s</b>')`) {
		t.Error("the newest event is not first, or its fields were not shown as text")
	}
	// Newest first: the page is the API's newest 50, in reverse.
	var newest []string
	for i := len(all.Events) - 1; i >= len(all.Events)-50; i-- {
		newest = append(newest, all.Events[i].ID)
	}
	if got := eval[string](p, `[...document.querySelectorAll('tr[data-feed-event]')].map(r => r.dataset.feedEvent).join(' ')`); got != strings.Join(newest, " ") {
		t.Errorf("the feed's first page:\n%s\nwant the newest 50, newest first:\n%s", got, strings.Join(newest, " "))
	}
	p.shot("feed-1280.png")
	p.step("load more", chromedp.Click(chromedp.CSS("#feed-more")),
		poll(fmt.Sprintf(`document.querySelectorAll('tr[data-feed-event]').length === %d && document.getElementById('feed-more').hidden`, len(all.Events))),
		poll(text("#feed")+`.includes('old 00')`))
	p.step("filter by session", setValue("#feed-session", fromTpl),
		chromedp.Click(chromedp.CSS("#feed-filter button[type=submit]")),
		poll(fmt.Sprintf(`location.hash === '#/events?session=%s'`, fromTpl)),
		poll(feedRow(fromTpl, airlock.EventSessionCreated)+` && `+feedRow(fromTpl, airlock.EventSessionEnded)),
		poll(fmt.Sprintf(`[...document.querySelectorAll('tr[data-feed-event]')].every(r => r.querySelector('a') && r.querySelector('a').textContent === %q)`, fromTpl)))
	p.shot("feed-session-1280.png")

	// ---- the webhook's delivery log: the first delivery was refused
	// once (500), then delivered; replayed, it is delivered again.
	var first *airlock.WebhookDelivery
	testreq.Eventually(t, 60*time.Second, "the first delivery, retried and delivered", func() bool {
		page, err := a.Client.WebhookDeliveries(ctx, hookID, "", 100)
		if err != nil {
			return false
		}
		for _, d := range page.Deliveries {
			if d.LastStatus == http.StatusNoContent && d.Attempts == 2 && d.State == airlock.DeliveryDelivered {
				first = d
			}
		}
		return first != nil
	})
	row := fmt.Sprintf(`tr[data-delivery=%q]`, first.ID)
	p.step("the delivery log", hash("#/webhooks"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-deliveries=%q]`, hookID))),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-deliveries=%q]`, hookID))),
		poll(fmt.Sprintf(`%s === 'delivered' && %s === '2' && %s.includes('204')`, text(row+" .badge"), text(row+" .tries"), text(row))),
		poll(text("#webhook-url-shown")+fmt.Sprintf(` === %q`, hookURL)))
	if !eval[bool](p, markupCheck) {
		t.Error("the webhook's URL became HTML")
	}
	p.shot("webhook-deliveries-1280.png")
	p.step("replay", chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-replay=%q]`, first.ID))),
		poll(fmt.Sprintf(`document.querySelector(%q) !== null`, row)))
	testreq.Eventually(t, 60*time.Second, "the replayed delivery", func() bool {
		page, err := a.Client.WebhookDeliveries(ctx, hookID, "", 100)
		if err != nil {
			return false
		}
		for _, d := range page.Deliveries {
			if d.ID == first.ID {
				return d.Attempts == 3 && d.State == airlock.DeliveryDelivered
			}
		}
		return false
	})
	p.step("the replay in the log", hash("#/webhooks"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-deliveries=%q]`, hookID))),
		hash("#/webhooks/"+hookID), poll(fmt.Sprintf(`%s === 'delivered' && %s === '3'`, text(row+" .badge"), text(row+" .tries"))))
	rcv.mu.Lock()
	bad, good := rcv.bad, rcv.good
	rcv.mu.Unlock()
	if len(bad) != 0 || good < 3 {
		t.Errorf("the receiver: %d good, bad signatures %v", good, bad)
	}

	// ---- narrow screens: nothing wider than the screen but the tables.
	for _, route := range []string{"#/templates", "#/templates/broken", "#/volumes", "#/events", "#/webhooks", "#/webhooks/" + hookID} {
		p.step("open "+route+" at 390", chromedp.EmulateViewport(390, 900), hash(route),
			poll(`document.querySelector('main h1') && !document.querySelector('main').textContent.includes('Loading…')`))
		if w := eval[int](p, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("page width of %s at 390: %d", route, w)
		}
		// Named apart from the other tests' screenshots.
		name := map[string]string{"#/templates": "templates", "#/templates/broken": "template-failed", "#/volumes": "volumes",
			"#/events": "feed", "#/webhooks": "webhooks"}[route]
		if name == "" {
			name = "webhook-deliveries"
		}
		p.shot(name + "-390.png")
	}
	p.step("back to 1280", chromedp.EmulateViewport(1280, 900))

	// ---- the other tenant's are never listed; its key sees its own.
	for _, c := range []struct{ route, ready, other string }{
		{"#/templates", "#build-name", `tr[data-template="b-template"]`},
		{"#/volumes", "#no-volumes", `tr[data-volume="b-volume"]`},
		{"#/webhooks", "tr[data-webhook]", `tr[data-webhook]:not([data-webhook="` + hookID + `"])`},
	} {
		p.step("a's "+c.route, hash(c.route), chromedp.WaitVisible(chromedp.CSS(c.ready)))
		if eval[bool](p, fmt.Sprintf(`document.querySelector(%q) !== null || document.body.textContent.includes('b-hook')`, c.other)) {
			t.Errorf("%s lists the other tenant's", c.route)
		}
	}
	p.step("sign in as the other tenant", chromedp.Click(chromedp.CSS("#signout")),
		chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), b.Key+"\r"),
		poll(`location.hash === '#/executions'`),
		hash("#/templates"), poll(`document.querySelector('tr[data-template="b-template"]') !== null && document.querySelectorAll('tr[data-template]').length === 1`),
		hash("#/volumes"), poll(`document.querySelector('tr[data-volume="b-volume"]') !== null && document.querySelectorAll('tr[data-volume]').length === 1`),
		hash("#/webhooks"), poll(`document.querySelectorAll('tr[data-webhook]').length === 1 && `+text("tr[data-webhook]")+`.includes('b-hook')`),
		hash("#/webhooks/"+hookID), poll(`document.querySelector('main .problem[data-status="404"]') !== null`),
		hash("#/events"), poll(`document.getElementById('no-feed') !== null`))
	p.shot("other-tenant-views-1280.png")
}
