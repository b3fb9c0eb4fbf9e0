package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// TestFleetPreview: a preview URL of a session works through every node
// of a fleet (real etcd and PostgreSQL), in the path form and the Host
// form, with the tenant's key, with a preview token and on a public
// port; the nodes that do not hold the session forward to the one that
// does, keeping the Host. Another tenant's key, a revoked key and no
// credential are refused on every node, with problems.
func TestFleetPreview(t *testing.T) {
	const domain = "fleet-preview.localhost"
	tf := startTestFleet(t, fleetOptions{extra: []string{"--preview-domain", domain}})
	n0 := tf.nodes[0]
	admin := n0.adminKey()

	// Another tenant, and a second key of the default tenant to revoke.
	if r := send(t, "POST", n0.url()+"/v1/admin/tenants", admin, strings.NewReader(`{"name":"fleet-preview-b"}`)); r.status != http.StatusCreated {
		t.Fatalf("create tenant: %d %s", r.status, r.body)
	}
	var keyB, keyR struct {
		KeyID string `json:"key_id"`
		Key   string `json:"key"`
	}
	r := send(t, "POST", n0.url()+"/v1/admin/tenants/fleet-preview-b/keys", admin, strings.NewReader(`{"name":"b"}`))
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &keyB) != nil {
		t.Fatalf("key of b: %d %s", r.status, r.body)
	}
	r = send(t, "POST", n0.url()+"/v1/keys", tf.key, strings.NewReader(`{"name":"to-revoke"}`))
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &keyR) != nil {
		t.Fatalf("second key: %d %s", r.status, r.body)
	}

	r = tf.call(n0, "POST", "/v1/sessions", `{"image": "python-ds"}`)
	var sess struct {
		ID string `json:"session_id"`
	}
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &sess) != nil {
		t.Fatalf("create session: %d %s", r.status, r.body)
	}
	t.Cleanup(func() { tf.call(n0, "DELETE", "/v1/sessions/"+sess.ID, "") })
	gr, err := tf.ecli.Get(context.Background(), fleet.DefaultPrefix+"sessions/"+sess.ID)
	if err != nil || len(gr.Kvs) != 1 {
		t.Fatalf("the session's mapping in etcd: %v %v", gr, err)
	}
	var bound struct {
		Node string `json:"node"`
	}
	json.Unmarshal(gr.Kvs[0].Value, &bound)
	t.Logf("session %s is held by %s", sess.ID, bound.Node)

	r = tf.call(n0, "POST", "/v1/sessions/"+sess.ID+"/exec",
		// The server leaves the exec's process group (setsid -f); the exec
		// returns once it listens.
		`{"shell": "mkdir -p site && echo fleet-preview > site/hello.txt && cd site && setsid -f python3 -m http.server 8000 --bind 127.0.0.1 </dev/null >/dev/null 2>&1; until python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8000))' 2>/dev/null; do sleep 0.1; done", "timeout_s": 60}`)
	if r.status != http.StatusOK {
		t.Fatalf("start the server: %d %s", r.status, r.body)
	}

	host := "8000-" + sess.ID + "." + domain
	path := "/v1/sessions/" + sess.ID + "/ports/8000"
	get := func(n *fleetNode, hostForm bool, hdr map[string]string) rawResponse {
		t.Helper()
		u := n.url() + path + "/hello.txt"
		if hostForm {
			u = n.url() + "/hello.txt"
		}
		req, err := http.NewRequest("GET", u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if hostForm {
			req.Host = host
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		c := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return rawResponse{status: resp.StatusCode, header: resp.Header, body: b}
	}
	bearer := func(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }
	// The server is up when the holder serves it.
	last := ""
	testreq.Eventually(t, 30*time.Second, "the server in the session answers through n0", func() bool {
		r := get(n0, false, bearer(tf.key))
		if now := fmt.Sprintf("%d %.200s", r.status, r.body); r.status != http.StatusOK && now != last {
			t.Logf("not yet: %s", now)
			last = now
		}
		return r.status == http.StatusOK
	})

	var tok struct {
		Token string `json:"token"`
	}
	r = tf.call(tf.nodes[1], "POST", path+"/token", `{"ttl_s": 600}`)
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &tok) != nil || tok.Token == "" {
		t.Fatalf("token through n1: %d %s", r.status, r.body)
	}
	want200 := func(r rawResponse, what string) {
		t.Helper()
		if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != "fleet-preview" {
			t.Fatalf("%s: %d %.300s", what, r.status, r.body)
		}
	}
	for _, n := range tf.nodes {
		for _, hostForm := range []bool{false, true} {
			form := n.id + map[bool]string{false: " path form", true: " Host form"}[hostForm]
			want200(get(n, hostForm, bearer(tf.key)), form+" with the key")
			want200(get(n, hostForm, map[string]string{"X-Airlock-Preview-Token": tok.Token}), form+" with a token")
			get(n, hostForm, bearer(keyB.Key)).problem(t, http.StatusNotFound)
			get(n, hostForm, nil).problem(t, http.StatusUnauthorized)
			get(n, hostForm, map[string]string{"X-Airlock-Preview-Token": tok.Token + "x"}).problem(t, http.StatusUnauthorized)
		}
		// The token and port routes refuse another tenant's key too.
		send(t, "POST", n.url()+path+"/token", keyB.Key, strings.NewReader(`{"ttl_s": 60}`)).problem(t, http.StatusNotFound)
		send(t, "PUT", n.url()+path, keyB.Key, strings.NewReader(`{"public": true}`)).problem(t, http.StatusNotFound)
	}

	// A public port opens without a credential, on every node.
	if r := tf.call(tf.nodes[2], "PUT", path, `{"public": true}`); r.status != http.StatusOK {
		t.Fatalf("make public through n2: %d %s", r.status, r.body)
	}
	for _, n := range tf.nodes {
		want200(get(n, true, nil), n.id+" public port, Host form")
		want200(get(n, false, nil), n.id+" public port, path form")
	}
	if r := tf.call(n0, "PUT", path, `{"public": false}`); r.status != http.StatusOK {
		t.Fatalf("make private: %d %s", r.status, r.body)
	}

	// The second key works until it is revoked; then every node refuses it.
	want200(get(tf.nodes[2], true, bearer(keyR.Key)), "second key")
	if r := send(t, "DELETE", n0.url()+"/v1/keys/"+keyR.KeyID, tf.key, nil); r.status != http.StatusOK {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	for _, n := range tf.nodes {
		for _, hostForm := range []bool{false, true} {
			testreq.Eventually(t, 10*time.Second, n.id+" refuses the revoked key", func() bool {
				return get(n, hostForm, bearer(keyR.Key)).status == http.StatusUnauthorized
			})
			get(n, hostForm, bearer(keyR.Key)).problem(t, http.StatusUnauthorized)
		}
	}
}
