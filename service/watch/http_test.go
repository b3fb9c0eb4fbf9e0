package watch_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/watch"
)

type sseEvent struct {
	name string
	data map[string]any
}

// readEvents sends the events of an SSE response to a channel.
func readEvents(resp *http.Response) <-chan sseEvent {
	ch := make(chan sseEvent, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(line[6:]), &ev.data)
			case line == "" && ev.name != "":
				ch <- ev
				ev = sseEvent{}
			}
		}
	}()
	return ch
}

func want(t *testing.T, ch <-chan sseEvent, name string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended before %s", name)
			}
			if ev.name == name && (match == nil || match(ev.data)) {
				return ev.data
			}
		case <-timeout:
			t.Fatalf("no %s event within 30s", name)
		}
	}
}

// TestOutputEndpoint watches a real session through the REST API while
// another client runs a command in it: the watcher that comes while the
// command runs sees its start and earlier output replayed, then the rest
// live, its end with the exit code, and the session's end.
func TestOutputEndpoint(t *testing.T) {
	s := teststack.New(t, teststack.Options{
		MaxTimeout: 60 * time.Second,
		WrapSessions: func(svc airlock.SessionService) airlock.SessionService {
			w, err := watch.New(watch.Config{Sessions: svc})
			if err != nil {
				t.Fatal(err)
			}
			return w
		},
	})
	a := s.NewTenant(t, "watch-a")
	b := s.NewTenant(t, "watch-b")
	ctx := context.Background()
	sess, _, err := a.Client.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Client.DeleteSession(ctx, sess.ID)

	started := make(chan string, 1)
	done := make(chan *airlock.Execution, 1)
	go func() {
		e, err := a.Client.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "echo first; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo second >&2; exit 4"})
		if err != nil {
			t.Error(err)
		}
		done <- e
	}()
	testreq.Eventually(t, 30*time.Second, "the command to run", func() bool {
		got, err := a.Client.Session(ctx, sess.ID)
		if err == nil && len(got.Running) == 1 {
			started <- got.Running[0].ExecutionID
			return true
		}
		return false
	})
	execID := <-started

	get := func(key string) *http.Response {
		req, _ := http.NewRequest("GET", s.URL+"/v1/sessions/"+sess.ID+"/output", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Another tenant's watch is a 404, like everything of the session.
	if resp := get(b.Key); resp.StatusCode != 404 {
		t.Errorf("another tenant: %d", resp.StatusCode)
	} else {
		resp.Body.Close()
	}
	resp := get(a.Key)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET output: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ch := readEvents(resp)
	want(t, ch, "watching", nil)
	start := want(t, ch, "start", func(d map[string]any) bool { return d["execution_id"] == execID })
	run := start["run"]
	if start["replay"] != true || start["kind"] != "exec" || !strings.HasPrefix(start["command"].(string), "echo first;") {
		t.Errorf("replayed start: %v", start)
	}
	// Replayed if it reached the server before the watch began, else
	// live: either way it comes after the start.
	if d := want(t, ch, "stdout", func(d map[string]any) bool { return d["run"] == run }); d["data"] != "first\n" {
		t.Errorf("earlier output: %v", d)
	}
	if _, err := a.Client.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "touch /tmp/go"}); err != nil {
		t.Fatal(err)
	}
	if d := want(t, ch, "stderr", func(d map[string]any) bool { return d["run"] == run }); d["data"] != "second\n" || d["replay"] != nil {
		t.Errorf("live output: %v", d)
	}
	if d := want(t, ch, "end", func(d map[string]any) bool { return d["run"] == run }); d["exit_code"] != float64(4) || d["execution_id"] != execID {
		t.Errorf("end: %v", d)
	}
	if e := <-done; e == nil || e.ExitCode != 4 || e.Stdout != "first\n" {
		t.Errorf("the command's own result: %+v", e)
	}
	if _, err := a.Client.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if d := want(t, ch, "closed", nil); d["state"] != string(airlock.SessionDestroyed) {
		t.Errorf("closed: %v", d)
	}
}
