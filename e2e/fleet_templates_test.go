package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/internal/testenv/s3test"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// TestFleetTemplatesAndVolumes: in a fleet (etcd, PostgreSQL, three
// nodes, one S3 bucket) a template made from a session on node A is
// uploaded to the bucket; with A stopped, sessions from it made at once
// through B and C (two slots each, so both take two) find the file only
// the template has, each node having pulled it once; the nodes publish that they hold
// it; another tenant's key cannot use it and a revoked key is refused;
// deleting it removes its object from the bucket and, lazily, the copies.
// A volume made through B is mounted by sessions made through C (they
// run on B) and keeps its data; with B stopped a session mounting it is
// 503 volume-unavailable naming B; back, the volume is deleted through C
// on B.
func TestFleetTemplatesAndVolumes(t *testing.T) {
	srv := s3test.Start(t)
	keyFile := filepath.Join(t.TempDir(), "signing.key")
	signingKey := make([]byte, 32)
	rand.Read(signingKey)
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(signingKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const prefix = "fleet-tpl/"
	tf := startTestFleet(t, fleetOptions{
		extra:    []string{"--blobs", srv.BucketURL("prefix=" + prefix), "--signing-key-file", keyFile},
		env:      srv.Env(),
		sessions: 2,
	})
	ctx := context.Background()
	n0 := tf.nodes[0]

	// Another tenant, and a second key of the default tenant to revoke.
	admin := n0.adminKey()
	if r := send(t, "POST", n0.url()+"/v1/admin/tenants", admin, strings.NewReader(`{"name":"fleet-tpl-b"}`)); r.status != http.StatusCreated {
		t.Fatalf("create tenant: %d %s", r.status, r.body)
	}
	var keyB, keyR struct {
		KeyID string `json:"key_id"`
		Key   string `json:"key"`
	}
	r := send(t, "POST", n0.url()+"/v1/admin/tenants/fleet-tpl-b/keys", admin, strings.NewReader(`{"name":"b"}`))
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &keyB) != nil {
		t.Fatalf("key of b: %d %s", r.status, r.body)
	}
	r = tf.call(n0, "POST", "/v1/keys", `{"name":"to-revoke"}`)
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &keyR) != nil {
		t.Fatalf("second key: %d %s", r.status, r.body)
	}

	// 1. A template made from a session, on the node A that holds the
	// session (a Dockerfile build cannot link the harness's read-only
	// bind mount of the images into its rootfs): the file only the
	// template has is in its /workspace.
	r = tf.call(n0, "POST", "/v1/sessions", `{"image":"base"}`)
	var src struct {
		ID string `json:"session_id"`
	}
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &src) != nil {
		t.Fatalf("the template's session: %d %s", r.status, r.body)
	}
	var a *fleetNode
	for _, n := range tf.nodes {
		if n.id == r.header.Get(fleet.HeaderNode) {
			a = n
		}
	}
	if a == nil {
		t.Fatalf("the session is on %q, no node of the fleet", r.header.Get(fleet.HeaderNode))
	}
	var b, c *fleetNode
	for _, n := range tf.nodes {
		if n != a {
			if b == nil {
				b = n
			} else {
				c = n
			}
		}
	}
	t.Logf("A (builds the template) is %s; B and C are %s and %s", a.id, b.id, c.id)
	if r := tf.call(n0, "POST", "/v1/sessions/"+src.ID+"/exec", `{"shell": "echo only-in-template > /workspace/fleet-marker", "timeout_s": 60}`); r.status != http.StatusOK {
		t.Fatalf("write the marker: %d %s", r.status, r.body)
	}
	if r := tf.call(n0, "POST", "/v1/sessions/"+src.ID+"/template", `{"name": "fleet-tpl"}`); r.status != http.StatusAccepted {
		t.Fatalf("make the template: %d %s", r.status, r.body)
	}
	var tpl airlock.Template
	if !testreq.Poll(10*time.Minute, func() bool {
		r := tf.call(n0, "GET", "/v1/templates/fleet-tpl", "")
		if r.status != http.StatusOK || json.Unmarshal(r.body, &tpl) != nil {
			t.Fatalf("GET the template: %d %s", r.status, r.body)
		}
		return tpl.Status != airlock.TemplateBuilding
	}) {
		t.Fatal("the template is still building after 10 minutes")
	}
	if tpl.Status != airlock.TemplateReady || !strings.HasPrefix(tpl.BlobDigest, "sha256:") {
		logs := tf.call(a, "GET", "/v1/templates/fleet-tpl/logs", "")
		t.Fatalf("template: %s (%s), blob_digest %q; log:\n%s", tpl.Status, tpl.Reason, tpl.BlobDigest, logs.body)
	}
	objects := func() []string {
		out, err := srv.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(srv.Bucket), Prefix: aws.String(prefix + "templates/" + tpl.ID + "/")})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		return keys
	}
	wantKey := prefix + airlock.TemplateBlobKey(tpl.ID, tpl.BlobDigest)
	if got := objects(); len(got) != 1 || got[0] != wantKey {
		t.Fatalf("the template's objects in the bucket: %v, want [%s]", got, wantKey)
	}
	t.Logf("template %s: %d bytes, archive %s", tpl.ID, tpl.SizeBytes, tpl.BlobDigest)
	if m := regexp.MustCompile(`uploaded sha256:\S+ \([^)]*\) in \S+`).Find(tf.call(a, "GET", "/v1/templates/fleet-tpl/logs", "").body); m != nil {
		t.Logf("build log: %s", m)
	}

	if r := tf.call(n0, "DELETE", "/v1/sessions/"+src.ID, ""); r.status/100 != 2 {
		t.Fatalf("delete the template's session: %d %s", r.status, r.body)
	}

	// 2. A goes away: placement cannot choose it, and no node can copy
	// from it.
	a.d.stop(t)
	testreq.Eventually(t, 20*time.Second, a.id+" left the fleet", func() bool { _, ok := tf.members()[a.id]; return !ok })
	n1, n2 := b, c

	// Four sessions from the template at once, through n1 and n2: two
	// slots a node, so each node takes two, and each pulls once.
	type made struct {
		status int
		node   string
		id     string
		body   string
	}
	results := make([]made, 4)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			via := []*fleetNode{n1, n2}[i%2]
			// Not send: no t.Fatal off the test's goroutine.
			req, _ := http.NewRequest("POST", via.url()+"/v1/sessions", strings.NewReader(`{"template":"fleet-tpl"}`))
			req.Header.Set("Authorization", "Bearer "+tf.key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := (&http.Client{Timeout: 3 * time.Minute}).Do(req)
			if err != nil {
				results[i] = made{body: err.Error()}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var s struct {
				ID string `json:"session_id"`
			}
			json.Unmarshal(b, &s)
			results[i] = made{resp.StatusCode, resp.Header.Get(fleet.HeaderNode), s.ID, clip(string(b), 300)}
		}()
	}
	wg.Wait()
	perNode := map[string]int{}
	for i, m := range results {
		if m.status != http.StatusCreated {
			t.Fatalf("session %d from the template: %d %s", i, m.status, m.body)
		}
		perNode[m.node]++
	}
	if perNode[n1.id] != 2 || perNode[n2.id] != 2 {
		t.Fatalf("sessions by node: %v, want two on each of %s and %s", perNode, n1.id, n2.id)
	}
	for i, m := range results {
		var out struct {
			ExitCode int    `json:"exit_code"`
			Stdout   string `json:"stdout"`
		}
		r := tf.call([]*fleetNode{n2, n1}[i%2], "POST", "/v1/sessions/"+m.id+"/exec", `{"shell": "cat /workspace/fleet-marker", "timeout_s": 60}`)
		if r.status != http.StatusOK || json.Unmarshal(r.body, &out) != nil || out.ExitCode != 0 || out.Stdout != "only-in-template\n" {
			t.Fatalf("the template's file in session %s on %s: %d %s", m.id, m.node, r.status, r.body)
		}
	}
	pulls := regexp.MustCompile(`(?m)^airlock_template_pulls_total\{result="(pulled|failed)"\} (\d+)$`)
	for _, n := range []*fleetNode{n1, n2} {
		r := send(t, "GET", n.url()+"/metrics", "", nil)
		got := map[string]string{}
		for _, m := range pulls.FindAllStringSubmatch(string(r.body), -1) {
			got[m[1]] = m[2]
		}
		if r.status != http.StatusOK || got["pulled"] != "1" || got["failed"] != "0" {
			t.Errorf("%s's pulls: %v (status %d), want pulled 1, failed 0", n.id, got, r.status)
		}
		if m := regexp.MustCompile(`(?m)^airlock_template_pull_seconds_sum (\S+)$`).FindStringSubmatch(string(r.body)); m != nil {
			t.Logf("%s pulled the template in %s s", n.id, m[1])
		}
		testreq.Eventually(t, 10*time.Second, n.id+" publishes that it holds the template", func() bool {
			return slices.Contains(tf.members()[n.id].Status.Templates, tpl.ID)
		})
	}

	// 3. Its sessions end; then it is deleted: the object leaves the
	// bucket, and the copy of the node that deleted it goes at once.
	for _, m := range results {
		if r := tf.call(n1, "DELETE", "/v1/sessions/"+m.id, ""); r.status/100 != 2 {
			t.Fatalf("delete session %s: %d %s", m.id, r.status, r.body)
		}
	}
	allocs := func() int64 {
		resp, err := tf.ecli.Get(ctx, fleet.DefaultPrefix+"alloc/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	testreq.Eventually(t, 20*time.Second, "the template sessions' reservations freed", func() bool { return allocs() == 0 })
	// Another tenant's key finds no such template, through any node; a
	// revoked key is refused (with slots free again: a full fleet answers
	// 503 before any node looks at the template).
	for _, n := range []*fleetNode{n1, n2} {
		send(t, "POST", n.url()+"/v1/sessions", keyB.Key, strings.NewReader(`{"template":"fleet-tpl"}`)).problem(t, http.StatusNotFound)
		send(t, "POST", n.url()+"/v1/execute", keyB.Key, strings.NewReader(`{"language":"bash","code":"cat /workspace/fleet-marker","template":"fleet-tpl"}`)).problem(t, http.StatusNotFound)
		send(t, "GET", n.url()+"/v1/templates/fleet-tpl", keyB.Key, nil).problem(t, http.StatusNotFound)
	}
	if r := send(t, "GET", n2.url()+"/v1/templates/fleet-tpl", keyR.Key, nil); r.status != http.StatusOK {
		t.Fatalf("the second key before it is revoked: %d %s", r.status, r.body)
	}
	if r := send(t, "DELETE", n1.url()+"/v1/keys/"+keyR.KeyID, tf.key, nil); r.status != http.StatusOK {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	for _, n := range []*fleetNode{n1, n2} {
		testreq.Eventually(t, 10*time.Second, n.id+" refuses the revoked key", func() bool {
			return send(t, "POST", n.url()+"/v1/sessions", keyR.Key, strings.NewReader(`{"template":"fleet-tpl"}`)).status == http.StatusUnauthorized
		})
		send(t, "POST", n.url()+"/v1/sessions", keyR.Key, strings.NewReader(`{"template":"fleet-tpl"}`)).problem(t, http.StatusUnauthorized)
	}

	if r := tf.call(n2, "DELETE", "/v1/templates/fleet-tpl", ""); r.status != http.StatusNoContent {
		t.Fatalf("delete the template through n2: %d %s", r.status, r.body)
	}
	if got := objects(); len(got) != 0 {
		t.Errorf("the deleted template's objects are still in the bucket: %v", got)
	}
	if _, err := os.Stat(filepath.Join(n2.dir, "templates", tpl.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("n2 kept its copy of the deleted template: %v", err)
	}
	tf.call(n1, "POST", "/v1/sessions", `{"template":"fleet-tpl"}`).problem(t, http.StatusNotFound)

	// 5. A volume made through n1 is held by n1.
	var vol airlock.Volume
	r = tf.call(n1, "POST", "/v1/volumes", `{"name":"fleet-vol","size_mib":16}`)
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &vol) != nil || vol.Node != n1.id {
		t.Fatalf("create the volume through n1: %d %s", r.status, r.body)
	}
	withVolume := `{"image":"base","volumes":[{"name":"fleet-vol","path":"/workspace/data"}]}`
	session := func(cmd string) string {
		t.Helper()
		r := tf.call(n2, "POST", "/v1/sessions", withVolume)
		var s struct {
			ID string `json:"session_id"`
		}
		if r.status != http.StatusCreated || json.Unmarshal(r.body, &s) != nil {
			t.Fatalf("a session with the volume through n2: %d %s", r.status, r.body)
		}
		defer tf.call(n2, "DELETE", "/v1/sessions/"+s.ID, "")
		if got := r.header.Get(fleet.HeaderNode); got != n1.id {
			t.Fatalf("the session with the volume runs on %q, want %s (which holds it)", got, n1.id)
		}
		var out struct {
			ExitCode int    `json:"exit_code"`
			Stdout   string `json:"stdout"`
			Stderr   string `json:"stderr"`
		}
		r = tf.call(n2, "POST", "/v1/sessions/"+s.ID+"/exec", `{"shell": `+jsonString(cmd)+`, "timeout_s": 60}`)
		if r.status != http.StatusOK || json.Unmarshal(r.body, &out) != nil || out.ExitCode != 0 {
			t.Fatalf("exec %q: %d %s", cmd, r.status, r.body)
		}
		return out.Stdout
	}
	session("echo kept-across-sessions > /workspace/data/note && sync")
	if got := session("cat /workspace/data/note"); got != "kept-across-sessions\n" {
		t.Fatalf("the volume's file in the next session: %q", got)
	}

	// 6. n1 stopped: a session mounting the volume is refused, naming n1,
	// and so is deleting the volume; nothing is made elsewhere.
	n1.d.stop(t)
	testreq.Eventually(t, 20*time.Second, n1.id+" left the fleet", func() bool { _, ok := tf.members()[n1.id]; return !ok })
	p := tf.call(n2, "POST", "/v1/sessions", withVolume).problem(t, http.StatusServiceUnavailable)
	if !strings.HasSuffix(p.Type, "volume-unavailable") {
		t.Errorf("problem type %q, want volume-unavailable", p.Type)
	}
	if !strings.Contains(p.Detail, "node "+n1.id) {
		t.Errorf("the problem does not name %s: %+v", n1.id, p)
	}
	tf.call(n2, "DELETE", "/v1/volumes/fleet-vol", "").problem(t, http.StatusServiceUnavailable)
	if ents, _ := filepath.Glob(filepath.Join(n2.dir, "volumes", "disks", "*", "fleet-vol.ext4")); len(ents) != 0 {
		t.Errorf("a disk of the volume was made on n2: %v", ents)
	}

	// 7. n1 back: its garbage collector removes its copy of the deleted
	// template, and the volume is deleted through n2 on n1.
	tf.start(n1)
	testreq.Eventually(t, 20*time.Second, n1.id+" is back", func() bool { _, ok := tf.members()[n1.id]; return ok })
	testreq.Eventually(t, 30*time.Second, n1.id+"'s copy of the deleted template collected", func() bool {
		_, err := os.Stat(filepath.Join(n1.dir, "templates", tpl.ID))
		return errors.Is(err, os.ErrNotExist)
	})
	r = tf.call(n2, "DELETE", "/v1/volumes/fleet-vol", "")
	if r.status != http.StatusNoContent || r.header.Get(fleet.HeaderNode) != n1.id {
		t.Fatalf("delete the volume through n2: %d from %q %s", r.status, r.header.Get(fleet.HeaderNode), r.body)
	}
	if ents, _ := filepath.Glob(filepath.Join(n1.dir, "volumes", "disks", "*", "fleet-vol.ext4")); len(ents) != 0 {
		t.Errorf("the deleted volume's disk is still on n1: %v", ents)
	}
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
