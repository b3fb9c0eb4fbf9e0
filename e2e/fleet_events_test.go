package e2e_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/service/webhook"
)

// In a fleet, the events of a session held by one node are in the feed
// read through another, and a webhook gets each event exactly once
// (one delivery, sent by one node), not once per node.
func TestFleetEventsAndWebhooks(t *testing.T) {
	var mk [32]byte
	rand.Read(mk[:])
	tf := startTestFleet(t, fleetOptions{
		extra: []string{"--webhook-allow-private"},
		env:   []string{"AIRLOCK_MASTER_KEY=" + hex.EncodeToString(mk[:])},
	})

	// The receiver counts the signed deliveries of each event.
	var (
		mu     sync.Mutex
		secret []byte
		got    = map[string]int{}
		types  []string
		bad    int
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if webhook.Verify(r.Header.Get(webhook.SignatureHeader), secret, body, time.Now(), 5*time.Minute) != nil {
			bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev airlock.Event
		json.Unmarshal(body, &ev)
		got[ev.ID]++
		types = append(types, ev.Type)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(recv.Close)

	resp := tf.call(tf.nodes[0], http.MethodPost, "/v1/webhooks", `{"url": "`+recv.URL+`/hook", "events": ["session.created", "session.ended"]}`)
	var hook airlock.Webhook
	if resp.status != http.StatusCreated || json.Unmarshal(resp.body, &hook) != nil {
		t.Fatalf("create webhook: %d %s", resp.status, resp.body)
	}
	mu.Lock()
	secret = []byte(hook.Secret)
	mu.Unlock()

	resp = tf.call(tf.nodes[1], http.MethodPost, "/v1/sessions", `{"image": "base", "timeout_s": 300}`)
	var sess airlock.Session
	if resp.status != http.StatusCreated || json.Unmarshal(resp.body, &sess) != nil {
		t.Fatalf("create session: %d %s", resp.status, resp.body)
	}
	holder := resp.header.Get(fleet.HeaderNode)
	var other *fleetNode
	for _, n := range tf.nodes {
		if n.id != holder {
			other = n
			break
		}
	}
	if holder == "" || other == nil {
		t.Fatalf("session held by %q", holder)
	}
	if resp := tf.call(tf.nodes[1], http.MethodDelete, "/v1/sessions/"+sess.ID, ""); resp.status/100 != 2 {
		t.Fatalf("delete session: %d %s", resp.status, resp.body)
	}

	// The feed read through a node that does not hold the session.
	var feed airlock.EventPage
	testreq.Eventually(t, time.Minute, "the session's events in the feed of node "+other.id, func() bool {
		resp := tf.call(other, http.MethodGet, "/v1/events?cursor=", "")
		if resp.status != http.StatusOK || json.Unmarshal(resp.body, &feed) != nil {
			return false
		}
		n := 0
		for _, ev := range feed.Events {
			if ev.SessionID == sess.ID {
				n++
			}
		}
		return n == 2
	})
	var mine []*airlock.Event
	for _, ev := range feed.Events {
		if ev.SessionID == sess.ID {
			mine = append(mine, ev)
		}
	}
	if mine[0].Type != airlock.EventSessionCreated || mine[1].Type != airlock.EventSessionEnded {
		t.Fatalf("feed through %s: %+v %+v", other.id, mine[0], mine[1])
	}

	// Every delivery is delivered (no node claims it again then); each
	// event reached the receiver once.
	testreq.Eventually(t, time.Minute, "both deliveries delivered", func() bool {
		resp := tf.call(other, http.MethodGet, "/v1/webhooks/"+hook.ID+"/deliveries", "")
		var p airlock.WebhookDeliveryPage
		if resp.status != http.StatusOK || json.Unmarshal(resp.body, &p) != nil || len(p.Deliveries) != 2 {
			return false
		}
		for _, d := range p.Deliveries {
			if d.State != airlock.DeliveryDelivered || d.Attempts != 1 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	if bad != 0 {
		t.Errorf("%d deliveries with a bad signature", bad)
	}
	for _, ev := range mine {
		if got[ev.ID] != 1 {
			t.Errorf("event %s (%s) delivered %d times, want once", ev.ID, ev.Type, got[ev.ID])
		}
	}
	if len(types) != 2 || types[0] != airlock.EventSessionCreated || types[1] != airlock.EventSessionEnded {
		t.Errorf("receiver got %v", types)
	}
}
