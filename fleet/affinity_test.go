package fleet_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/internal/etcdtest"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// names is tenant t1's templates and volumes as the shared store has
// them: template "py" is tpl-1; volume "data" is held by n1, "lost" by
// a node that is not a member.
type names struct{}

func (names) Template(_ context.Context, tenant, name string) (string, error) {
	if tenant == "t1" && name == "py" {
		return "tpl-1", nil
	}
	return "", nil
}

func (names) VolumeNode(_ context.Context, tenant, name string) (string, error) {
	switch {
	case tenant != "t1":
	case name == "data":
		return "n1", nil
	case name == "lost":
		return "n9", nil
	}
	return "", airlock.Problem(airlock.ENOTFOUND, "volume-not-found", "no volume %s", name)
}

// TestAffinity: sessions from a template go to the node that holds it
// until that node is much fuller than another; a session mounting a
// volume goes to the node holding the volume, through any node, and is
// refused with 503 volume-unavailable, naming the node, while that node
// is not a member; deleting a volume goes to its node too.
func TestAffinity(t *testing.T) {
	c := etcdtest.Start(t, 3)
	st := newStore()
	o := opts{affinity: names{}}
	n0 := startNode(t, c, st, "n0", o)
	n1 := startNode(t, c, st, "n1", o)
	o.templates = []string{"tpl-0", "tpl-1"}
	n2 := startNode(t, c, st, "n2", o)
	nodes := []*node{n0, n1, n2}
	testreq.Eventually(t, 10*time.Second, "every node sees every member", func() bool {
		for _, x := range nodes {
			if len(x.f.Members()) != 3 {
				return false
			}
		}
		return true
	})

	// Capacity 10 sessions, 8 CPUs, 4 GiB; a session 0.25 CPU, 128 MiB:
	// the holder's bonus outweighs four sessions more than an empty node.
	for i := range 4 {
		resp, body := post(t, n0.srv.URL+"/v1/sessions", `{"template":"py"}`)
		if resp.StatusCode != 201 || resp.Header.Get(fleet.HeaderNode) != "n2" {
			t.Fatalf("template session %d: %d on %q, want n2: %s", i, resp.StatusCode, resp.Header.Get(fleet.HeaderNode), body)
		}
	}
	testreq.Eventually(t, 5*time.Second, "n0 sees n2's four reservations", func() bool { return len(n0.f.Reservations("n2")) == 4 })
	resp, body := post(t, n0.srv.URL+"/v1/sessions", `{"template":"py"}`)
	if resp.StatusCode != 201 || resp.Header.Get(fleet.HeaderNode) == "n2" {
		t.Fatalf("template session with its holder much fuller: %d on %q: %s", resp.StatusCode, resp.Header.Get(fleet.HeaderNode), body)
	}

	// Volumes: through every node, to n1.
	for _, via := range nodes {
		resp, body := post(t, via.srv.URL+"/v1/sessions", `{"volumes":[{"name":"nope","path":"/mnt/x"},{"name":"data","path":"/mnt/d"}]}`)
		if resp.StatusCode != 201 || resp.Header.Get(fleet.HeaderNode) != "n1" {
			t.Fatalf("volume session through %s: %d on %q, want n1: %s", via.id, resp.StatusCode, resp.Header.Get(fleet.HeaderNode), body)
		}
		resp, body = post(t, via.srv.URL+"/v1/sessions", `{"template":"py","volumes":[{"name":"lost","path":"/mnt/d"}]}`)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), fleet.ProblemVolumeUnavailable) ||
			!strings.Contains(string(body), `"node":"n9"`) || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("volume of a node that is gone, through %s: %d %s", via.id, resp.StatusCode, body)
		}
	}

	del := func(via *node, name, key string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodDelete, via.srv.URL+"/v1/volumes/"+name, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, via := range nodes {
		if resp, body := del(via, "data", testKey); resp.StatusCode != 200 || resp.Header.Get(fleet.HeaderNode) != "n1" || !strings.Contains(body, `"n1"`) {
			t.Fatalf("delete volume through %s: %d on %q: %s", via.id, resp.StatusCode, resp.Header.Get(fleet.HeaderNode), body)
		}
		if resp, body := del(via, "lost", testKey); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, fleet.ProblemVolumeUnavailable) {
			t.Fatalf("delete a volume of a node that is gone, through %s: %d %s", via.id, resp.StatusCode, body)
		}
		if resp, body := del(via, "data", ""); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("delete a volume without a key, through %s: %d %s", via.id, resp.StatusCode, body)
		}
		if resp, body := del(via, "data", "a-wrong-key"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("delete a volume with a wrong key, through %s: %d %s", via.id, resp.StatusCode, body)
		}
	}
}
