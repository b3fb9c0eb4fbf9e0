package e2b_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/e2b"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/session"
)

var _ e2b.Sessions = (*session.Manager)(nil)

// node is one Airlock node in the test's process (real SQLite, gVisor,
// session manager) with the E2B API on a loopback server.
type node struct {
	st   *teststack.Stack
	srv  *e2b.Server
	url  string
	keyA string // tenant a
	keyB string // tenant b
	a, b *airlock.Tenant
}

func newNode(t *testing.T) *node {
	t.Helper()
	return newNodeWith(t, teststack.Options{NoServer: true})
}

func newNodeWith(t *testing.T, o teststack.Options) *node {
	t.Helper()
	return newNodeConfig(t, o, nil)
}

// newNodeConfig builds a node whose E2B config adjust changes (the
// session service's limits come from o).
func newNodeConfig(t *testing.T, o teststack.Options, adjust func(*e2b.Config)) *node {
	t.Helper()
	st := teststack.New(t, o)
	secret := make([]byte, 32)
	rand.Read(secret)
	// As airlockd does: the E2B limits are the session service's.
	cfg := e2b.Config{
		Sessions: st.Sessions, Store: st.Store, Tenants: st.Store, Secret: secret,
		MaxLifetime: orDefault(st.SessionCfg.MaxLifetime, 12*time.Hour), MaxProcessTimeout: orDefault(st.SessionCfg.MaxExecTimeout, time.Hour),
		NetworkAllow: o.NetworkAllow, Logger: st.Logger,
	}
	if adjust != nil {
		adjust(&cfg)
	}
	srv, err := e2b.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Wrap(http.NotFoundHandler()))
	t.Cleanup(hs.Close)
	a, b := st.NewTenant(t, "a"), st.NewTenant(t, "b")
	return &node{st: st, srv: srv, url: hs.URL, keyA: a.Key, keyB: b.Key, a: a.Tenant, b: b.Tenant}
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// reply is an HTTP answer read in full.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("status %d, body not JSON: %v: %.300q", r.status, err, r.body)
	}
}

// do sends one request.
func (n *node) do(t *testing.T, method, path string, header map[string]string, body io.Reader) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, n.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// sandbox is a created sandbox as the control plane answered.
type sandbox struct {
	SandboxID          string `json:"sandboxID"`
	TemplateID         string `json:"templateID"`
	ClientID           string `json:"clientID"`
	EnvdVersion        string `json:"envdVersion"`
	EnvdAccessToken    string `json:"envdAccessToken"`
	TrafficAccessToken string `json:"trafficAccessToken"`
	Domain             string `json:"domain"`
}

func (n *node) create(t *testing.T, key, body string) sandbox {
	t.Helper()
	r := n.do(t, "POST", "/v2/sandboxes", map[string]string{"X-API-KEY": key, "Content-Type": "application/json"}, strings.NewReader(body))
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var s sandbox
	r.json(t, &s)
	t.Cleanup(func() {
		n.do(t, "DELETE", "/sandboxes/"+s.SandboxID, map[string]string{"X-API-KEY": key}, nil)
	})
	return s
}

// envd returns the headers of an envd call into s.
func (s sandbox) envd(extra ...string) map[string]string {
	h := map[string]string{"E2b-Sandbox-Id": s.SandboxID, "E2b-Sandbox-Port": "49983", "X-Access-Token": s.EnvdAccessToken}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

// interp returns the headers of a code interpreter call into s (both
// tokens, as the SDKs send them to /execute), with extra headers set.
func (s sandbox) interp(extra ...string) map[string]string {
	h := map[string]string{"E2b-Sandbox-Id": s.SandboxID, "E2b-Sandbox-Port": "49999", "X-Access-Token": s.EnvdAccessToken,
		"E2B-Traffic-Access-Token": s.TrafficAccessToken, "Content-Type": "application/json"}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

// trafficOnly drops the envd access token from h.
func trafficOnly(h map[string]string) map[string]string {
	delete(h, "X-Access-Token")
	return h
}

// envelope frames one Connect streaming message.
func envelope(flags byte, payload []byte) []byte {
	b := make([]byte, 5, 5+len(payload))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

// envelopes splits a Connect streaming body; the last is the end-stream
// message (flags 0x02).
func envelopes(t *testing.T, b []byte) (msgs []json.RawMessage, end json.RawMessage) {
	t.Helper()
	for len(b) > 0 {
		if len(b) < 5 {
			t.Fatalf("truncated envelope: %q", b)
		}
		flags, n := b[0], binary.BigEndian.Uint32(b[1:5])
		if uint32(len(b)-5) < n {
			t.Fatalf("envelope of %d bytes, %d left", n, len(b)-5)
		}
		payload := json.RawMessage(b[5 : 5+n])
		b = b[5+n:]
		if flags&2 != 0 {
			if len(b) != 0 {
				t.Fatalf("data after the end-stream message: %q", b)
			}
			return msgs, payload
		}
		msgs = append(msgs, payload)
	}
	t.Fatal("no end-stream message")
	return nil, nil
}

// connectStream sends one message to a server-streaming procedure.
func (n *node) connectStream(t *testing.T, procedure string, h map[string]string, msg string) (int, []json.RawMessage, json.RawMessage) {
	t.Helper()
	h["Content-Type"] = "application/connect+json"
	h["Connect-Protocol-Version"] = "1"
	r := n.do(t, "POST", procedure, h, bytes.NewReader(envelope(0, []byte(msg))))
	if r.status != 200 {
		return r.status, nil, r.body
	}
	msgs, end := envelopes(t, r.body)
	return r.status, msgs, end
}

// connectUnary calls a unary procedure with the JSON codec.
func (n *node) connectUnary(t *testing.T, procedure string, h map[string]string, msg string) reply {
	t.Helper()
	h["Content-Type"] = "application/json"
	h["Connect-Protocol-Version"] = "1"
	return n.do(t, "POST", procedure, h, strings.NewReader(msg))
}

func mustTenants(t *testing.T, n *node) []*airlock.Tenant {
	t.Helper()
	l, err := n.st.Store.ListTenants(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l
}
