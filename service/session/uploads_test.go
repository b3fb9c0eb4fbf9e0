package session_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/session"
)

// An upload that trickles (a slow-loris: it announces a megabyte, sends
// a hundred bytes and stops) is cut off after its rate window with 400
// upload-too-slow, and leaves no file; while it holds the session's only
// upload slot, another upload gets 429 too-many-uploads with a
// Retry-After; once it is cut off, uploads go through again.
func TestUploadRateAndInFlightCap(t *testing.T) {
	const window = 3 * time.Second
	s := newStackWith(t, teststack.Options{
		Session: func(c *session.Config) { c.MaxUploads = 1 },
		REST:    func(c *rest.Config) { c.UploadMinRate, c.UploadRateWindow = 4<<10, window },
	})
	sess := s.create(s.a, airlock.CreateSessionRequest{})

	// The slow upload must hold the slot before the probes: a probe that
	// got there first makes it the one refused, and then it starts again.
	var conn net.Conn
	var start time.Time
	var ce *client.Error
	busy := false
	for attempt := 0; attempt < 3 && !busy; attempt++ {
		if conn != nil {
			conn.Close()
		}
		var err error
		conn, err = net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start = time.Now()
		fmt.Fprintf(conn, "PUT /v1/sessions/%s/files?path=slow.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
			sess.ID, s.a.key, 1<<20, strings.Repeat("x", 100))
		time.Sleep(200 * time.Millisecond) // a head start only; the probes below decide
		// While the slow upload holds the slot: 429 with Retry-After.
		busy = testreq.Poll(window/2, func() bool {
			_, err := s.a.c.PutFile(ctxFor(t, time.Minute), sess.ID, "other.txt", strings.NewReader("hi"), 2)
			return errors.As(err, &ce) && ce.Status == http.StatusTooManyRequests
		})
	}
	if !busy {
		t.Fatalf("a second upload beside the held one was not refused: %v", ce)
	}
	if ce.Type != rest.ProblemTypePrefix+"too-many-uploads" || ce.RetryAfter <= 0 {
		t.Errorf("refusal: %s, Retry-After %v", ce.Type, ce.RetryAfter)
	}

	conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to the slow upload: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	var p struct{ Type string }
	json.Unmarshal(body, &p)
	if resp.StatusCode != http.StatusBadRequest || p.Type != rest.ProblemTypePrefix+"upload-too-slow" {
		t.Fatalf("slow upload: %d %s", resp.StatusCode, body)
	}
	if took := time.Since(start); took > 4*window {
		t.Errorf("the slow upload was cut off after %v (window %v)", took, window)
	}

	if _, err := s.a.c.PutFile(ctxFor(t, time.Minute), sess.ID, "other.txt", strings.NewReader("hi"), 2); err != nil {
		t.Fatalf("an upload after the slow one was cut off: %v", err)
	}
	if l, err := s.a.c.ListFiles(ctxFor(t, time.Minute), sess.ID, "."); err != nil {
		t.Fatal(err)
	} else {
		for _, e := range l.Entries {
			if strings.Contains(e.Name, "slow") {
				t.Errorf("the cut-off upload left %s", e.Name)
			}
		}
	}
}
