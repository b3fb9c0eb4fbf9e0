package e2b_test

import (
	"context"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/api/e2b"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/session"
)

// detail is a sandbox as GET /sandboxes/{id} and the list answer it.
type detail struct {
	SandboxID           string            `json:"sandboxID"`
	TemplateID          string            `json:"templateID"`
	StartedAt           time.Time         `json:"startedAt"`
	EndAt               time.Time         `json:"endAt"`
	State               string            `json:"state"`
	Metadata            map[string]string `json:"metadata"`
	AllowInternetAccess bool              `json:"allowInternetAccess"`
	Network             *struct {
		AllowOut []string `json:"allowOut"`
	} `json:"network"`
}

func (n *node) info(t *testing.T, key, id string) detail {
	t.Helper()
	r := n.do(t, "GET", "/sandboxes/"+id, map[string]string{"X-API-KEY": key}, nil)
	if r.status != 200 {
		t.Fatalf("info %s: %d %s", id, r.status, r.body)
	}
	var d detail
	r.json(t, &d)
	return d
}

// TestListPaging lists a tenant's sandboxes a page at a time, following
// X-Next-Token, with and without the metadata filter: every sandbox of
// the tenant exactly once, none of another tenant's, no token on the last
// page.
func TestListPaging(t *testing.T) {
	n := newNode(t)
	ids := map[string][]string{} // by metadata "group"
	for _, g := range []string{"one", "two", "one"} {
		s := n.create(t, n.keyA, `{"templateID":"base","metadata":{"group":"`+g+`","n":"a&b=c"}}`)
		ids[g] = append(ids[g], s.SandboxID)
	}
	other := n.create(t, n.keyB, `{"templateID":"base","metadata":{"group":"one"}}`)
	all := append(append([]string{}, ids["one"]...), ids["two"]...)

	// The SDKs send the filter as one parameter, k=v pairs URL-encoded
	// once for the pairs and once more as the parameter.
	filter := func(kv ...string) string {
		q := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		return "&metadata=" + url.QueryEscape(q.Encode())
	}
	for _, c := range []struct {
		name  string
		path  string
		limit int
		want  []string
	}{
		{"pages of one", "/v2/sandboxes?", 1, all},
		{"pages of two", "/v2/sandboxes?", 2, all},
		{"one page", "/v2/sandboxes?", 3, all},
		{"v1 path", "/sandboxes?", 2, all},
		{"filtered, pages of one", "/v2/sandboxes?" + filter("group", "one")[1:], 1, ids["one"]},
		{"filtered by two keys", "/v2/sandboxes?state=running" + filter("group", "two", "n", "a&b=c"), 1, ids["two"]},
		{"filter matching none", "/v2/sandboxes?" + filter("group", "three")[1:], 1, nil},
		{"a value that differs", "/v2/sandboxes?" + filter("n", "a")[1:], 5, nil},
		{"paused only", "/v2/sandboxes?state=paused", 5, nil},
	} {
		var got []string
		token, pages := "", 0
		for {
			path := c.path + "&limit=" + strconv.Itoa(c.limit)
			if token != "" {
				path += "&nextToken=" + url.QueryEscape(token)
			}
			r := n.do(t, "GET", path, map[string]string{"X-API-KEY": n.keyA}, nil)
			if r.status != 200 {
				t.Fatalf("%s: %s: %d %s", c.name, path, r.status, r.body)
			}
			var page []detail
			r.json(t, &page)
			pages++
			if len(page) > c.limit || len(page) == 0 && pages > 1 {
				t.Errorf("%s: page %d has %d sandboxes (limit %d)", c.name, pages, len(page), c.limit)
			}
			for _, d := range page {
				if d.State != "running" || d.Metadata["group"] == "" {
					t.Errorf("%s: listed %+v", c.name, d)
				}
				got = append(got, d.SandboxID)
			}
			token = r.header.Get("X-Next-Token")
			if token == "" || pages > 10 {
				break
			}
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s: listed %v in %d pages, want %v", c.name, got, pages, want)
		}
		if slices.Contains(got, other.SandboxID) {
			t.Errorf("%s: another tenant's sandbox listed", c.name)
		}
		if wantPages := max(1, (len(c.want)+c.limit-1)/c.limit); pages != wantPages {
			t.Errorf("%s: %d pages, want %d", c.name, pages, wantPages)
		}
	}

	// A killed sandbox leaves the list, also when its ID is the token of
	// the next page.
	key := map[string]string{"X-API-KEY": n.keyA}
	r := n.do(t, "GET", "/v2/sandboxes?limit=1", key, nil)
	var page []detail
	r.json(t, &page)
	token := r.header.Get("X-Next-Token")
	if len(page) != 1 || token == "" {
		t.Fatalf("first page: %s, token %q", r.body, token)
	}
	if r := n.do(t, "DELETE", "/sandboxes/"+page[0].SandboxID, key, nil); r.status != 204 {
		t.Fatalf("kill: %d %s", r.status, r.body)
	}
	r = n.do(t, "GET", "/v2/sandboxes?limit=5&nextToken="+url.QueryEscape(token), key, nil)
	var rest []detail
	if r.json(t, &rest); r.status != 200 || len(rest) != 2 || r.header.Get("X-Next-Token") != "" {
		t.Errorf("the page after a killed sandbox's token: %d %s", r.status, r.body)
	}
	r = n.do(t, "GET", "/v2/sandboxes?limit=100", key, nil)
	if r.json(t, &page); len(page) != 2 || r.header.Get("X-Next-Token") != "" {
		t.Errorf("after a kill: %d listed, token %q", len(page), r.header.Get("X-Next-Token"))
	}
	idsOf := func(l []detail) []string {
		var out []string
		for _, d := range l {
			out = append(out, d.SandboxID)
		}
		slices.Sort(out)
		return out
	}
	if got := idsOf(page); !slices.Equal(got, idsOf(rest)) || slices.Contains(got, token) {
		t.Errorf("after a kill: %v, the page after the token %v", got, idsOf(rest))
	}
}

// TestTimeoutClamp checks that a sandbox's timeout, at create, at
// setTimeout and at connect, is clamped to the session service's maximum
// lifetime, counted from the sandbox's creation, and that setTimeout may
// also shorten it.
func TestTimeoutClamp(t *testing.T) {
	const maxLife = time.Hour
	n := newNodeWith(t, teststack.Options{NoServer: true, Session: func(c *session.Config) { c.MaxLifetime = maxLife }})
	key := map[string]string{"X-API-KEY": n.keyA}
	near := func(what string, got, want time.Time) {
		t.Helper()
		if d := got.Sub(want); d < -3*time.Second || d > 3*time.Second {
			t.Errorf("%s: ends at %s, want about %s (%s off)", what, got.Format(time.RFC3339), want.Format(time.RFC3339), d)
		}
	}

	s := n.create(t, n.keyA, `{"templateID":"base","timeout":864000}`)
	d := n.info(t, n.keyA, s.SandboxID)
	near("create with 10 days", d.EndAt, d.StartedAt.Add(maxLife))

	dflt := n.create(t, n.keyA, `{"templateID":"base"}`)
	d2 := n.info(t, n.keyA, dflt.SandboxID)
	near("create without a timeout", d2.EndAt, d2.StartedAt.Add(e2b.DefaultTimeout))

	for _, c := range []struct {
		name, path, body string
		status           int
		end              func() time.Time
	}{
		{"shorten", "/timeout", `{"timeout":120}`, 204, func() time.Time { return time.Now().Add(2 * time.Minute) }},
		{"connect with less changes nothing", "/connect", `{"timeout":60}`, 200, func() time.Time { return time.Now().Add(2 * time.Minute) }},
		{"connect lengthens within the maximum", "/connect", `{"timeout":864000}`, 200, func() time.Time { return d.StartedAt.Add(maxLife) }},
		{"shorten again", "/timeout", `{"timeout":60}`, 204, func() time.Time { return time.Now().Add(time.Minute) }},
		{"set 10 days", "/timeout", `{"timeout":864000}`, 204, func() time.Time { return d.StartedAt.Add(maxLife) }},
		{"set the largest int64", "/timeout", `{"timeout":9223372036854775807}`, 204, func() time.Time { return d.StartedAt.Add(maxLife) }},
	} {
		r := n.do(t, "POST", "/sandboxes/"+s.SandboxID+c.path, key, strings.NewReader(c.body))
		if r.status != c.status {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
			continue
		}
		near(c.name, n.info(t, n.keyA, s.SandboxID).EndAt, c.end())
	}
	// The session service agrees.
	sess, err := n.st.Sessions.Session(context.Background(), n.a, s.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	near("the session", sess.ExpiresAt, sess.CreatedAt.Add(maxLife))
}

// TestTemplates maps templates to images through Config.Templates (what
// airlockd's --e2b-template fills): a mapped name runs its image and is
// reported back, a name not in the map is a 404 even if it is one of the
// defaults, and a bad map is refused.
func TestTemplates(t *testing.T) {
	n := newNodeConfig(t, teststack.Options{NoServer: true}, func(c *e2b.Config) {
		c.Templates = map[string]string{"my-datasci": "python-ds", "tiny": "base"}
	})
	ctx := context.Background()
	for _, c := range []struct{ template, image string }{{"my-datasci", "python-ds"}, {"tiny", "base"}} {
		s := n.create(t, n.keyA, `{"templateID":"`+c.template+`"}`)
		sess, err := n.st.Sessions.Session(ctx, n.a, s.SandboxID)
		if err != nil {
			t.Fatal(err)
		}
		if s.TemplateID != c.template || sess.Image != c.image {
			t.Errorf("template %s: templateID %q, image %q, want %q", c.template, s.TemplateID, sess.Image, c.image)
		}
		if d := n.info(t, n.keyA, s.SandboxID); d.TemplateID != c.template {
			t.Errorf("template %s: info says %q", c.template, d.TemplateID)
		}
		r := n.do(t, "GET", "/v2/sandboxes", map[string]string{"X-API-KEY": n.keyA}, nil)
		if !strings.Contains(string(r.body), `"templateID":"`+c.template+`"`) {
			t.Errorf("template %s: list says %s", c.template, r.body)
		}
	}
	for _, name := range []string{"base", "code-interpreter-v1", ""} {
		body := `{"templateID":"` + name + `"}`
		if name == "" {
			body = `{}` // the SDK's default is base
		}
		r := n.do(t, "POST", "/v2/sandboxes", map[string]string{"X-API-KEY": n.keyA}, strings.NewReader(body))
		var e apiErr
		if r.json(t, &e); r.status != 404 || !strings.Contains(e.Message, "my-datasci") {
			t.Errorf("template %q not in the map: %d %s", name, r.status, r.body)
		}
	}

	for _, bad := range []map[string]string{{"x": ""}, {"": "base"}} {
		cfg := e2b.Config{Sessions: n.st.Sessions, Store: n.st.Store, Tenants: n.st.Store, Secret: make([]byte, 32),
			MaxLifetime: time.Hour, MaxProcessTimeout: time.Hour, Templates: bad}
		if _, err := e2b.New(cfg); err == nil {
			t.Errorf("templates %v: no error", bad)
		}
	}
}
