package e2b_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// procEvent is one message of a Start or Connect stream.
type procEvent struct {
	Event struct {
		Start *struct {
			Pid int `json:"pid"`
		} `json:"start"`
		Data *struct {
			Stdout []byte `json:"stdout"`
			Stderr []byte `json:"stderr"`
		} `json:"data"`
		Keepalive *struct{} `json:"keepalive"`
		End       *struct {
			ExitCode int    `json:"exitCode"`
			Exited   bool   `json:"exited"`
			Status   string `json:"status"`
			Error    string `json:"error"`
		} `json:"end"`
	} `json:"event"`
}

// liveStream is a Connect server stream read message by message, as it
// comes; drop closes the connection under it.
type liveStream struct {
	t    *testing.T
	body io.ReadCloser
	drop context.CancelFunc
}

// open starts a server-streaming call and returns once the response
// headers are in.
func (n *node) open(t *testing.T, procedure string, h map[string]string, msg string) *liveStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	req, err := http.NewRequestWithContext(ctx, "POST", n.url+procedure, bytes.NewReader(envelope(0, []byte(msg))))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("%s: %v", procedure, err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("%s: %d %s", procedure, resp.StatusCode, b)
	}
	s := &liveStream{t: t, body: resp.Body, drop: cancel}
	t.Cleanup(s.close)
	return s
}

func (s *liveStream) close() {
	s.drop()
	s.body.Close()
}

// next returns the next message; end is set for the end-stream message
// (whose payload is then the Connect end: {} or an error).
func (s *liveStream) next() (ev procEvent, raw json.RawMessage, end bool) {
	s.t.Helper()
	var head [5]byte
	if _, err := io.ReadFull(s.body, head[:]); err != nil {
		s.t.Fatalf("stream: read an envelope: %v", err)
	}
	payload := make([]byte, binary.BigEndian.Uint32(head[1:]))
	if _, err := io.ReadFull(s.body, payload); err != nil {
		s.t.Fatalf("stream: read a message: %v", err)
	}
	if head[0]&2 != 0 {
		return ev, payload, true
	}
	if err := json.Unmarshal(payload, &ev); err != nil {
		s.t.Fatalf("stream: message %s: %v", payload, err)
	}
	return ev, payload, false
}

// streamed is what a stream held to its end.
type streamed struct {
	pid        int
	stdout     string
	keepalives int
	end        *procEvent
	final      string // the end-stream message
}

// rest reads a stream to its end.
func (s *liveStream) rest(into *streamed) *streamed {
	s.t.Helper()
	for {
		ev, raw, end := s.next()
		switch {
		case end:
			into.final = string(raw)
			return into
		case ev.Event.Start != nil:
			into.pid = ev.Event.Start.Pid
		case ev.Event.Data != nil:
			into.stdout += string(ev.Event.Data.Stdout)
		case ev.Event.Keepalive != nil:
			into.keepalives++
		case ev.Event.End != nil:
			e := ev
			into.end = &e
		}
	}
}

// touch writes a file into the sandbox through /files.
func (n *node) touch(t *testing.T, s sandbox, path string) {
	t.Helper()
	if r := n.do(t, "POST", "/files?path="+path, s.envd("Content-Type", "application/octet-stream"), strings.NewReader("go")); r.status != 200 {
		t.Fatalf("write %s: %d %s", path, r.status, r.body)
	}
}

// listed reports whether Process/List names pid.
func (n *node) listed(t *testing.T, s sandbox, pid int) bool {
	t.Helper()
	r := n.connectUnary(t, "/process.Process/List", s.envd(), `{}`)
	if r.status != 200 {
		t.Fatalf("List: %d %s", r.status, r.body)
	}
	var l struct {
		Processes []struct {
			Pid int `json:"pid"`
		} `json:"processes"`
	}
	r.json(t, &l)
	for _, p := range l.Processes {
		if p.Pid == pid {
			return true
		}
	}
	return false
}

func bash(script string) string {
	b, _ := json.Marshal(script)
	return `{"process":{"cmd":"/bin/bash","args":["-l","-c",` + string(b) + `]}}`
}

// TestProcessLifetime checks that a process's life is the request's
// Connect-Timeout-Ms and not its connection's: it is killed at that
// deadline, and it outlives a dropped stream, which Connect reattaches
// to.
func TestProcessLifetime(t *testing.T) {
	n := newNode(t)
	s := n.create(t, n.keyA, `{"templateID":"base"}`)

	t.Run("killed at Connect-Timeout-Ms", func(t *testing.T) {
		// The Start stream carries the deadline, so it ends with
		// deadline_exceeded (the SDK's TimeoutError), as envd's does; the
		// process is killed then too, which a Connect stream (without a
		// deadline of its own) sees as its end.
		start := time.Now()
		st := n.open(t, "/process.Process/Start", s.envd("Connect-Timeout-Ms", "3000"), bash("echo up; exec sleep 60"))
		ev, _, _ := st.next()
		if ev.Event.Start == nil {
			t.Fatalf("first message %+v", ev)
		}
		pid := ev.Event.Start.Pid
		c := n.open(t, "/process.Process/Connect", s.envd(), `{"process":{"pid":`+strconv.Itoa(pid)+`}}`)
		got := st.rest(&streamed{})
		if took := time.Since(start); !strings.Contains(got.final, "deadline_exceeded") || took < 2900*time.Millisecond {
			t.Errorf("Start stream ended after %s with %s", took, got.final)
		}
		att := c.rest(&streamed{})
		took := time.Since(start)
		if att.final != "{}" || att.end == nil {
			t.Fatalf("Connect stream: %+v", att)
		}
		if e := att.end.Event.End; e.Exited || e.Status != "killed at its deadline" || !strings.Contains(e.Error, "3s") {
			t.Errorf("end event %+v, want killed at its deadline of 3s", e)
		}
		if took < 2900*time.Millisecond || took > 40*time.Second {
			t.Errorf("a process with a 3 s deadline ended after %s", took)
		}
		if n.listed(t, s, pid) {
			t.Errorf("pid %d still listed after its deadline", pid)
		}
	})

	t.Run("outlives a dropped stream", func(t *testing.T) {
		// The process waits for a file the test writes only after
		// reattaching, so its end can only come through Connect.
		st := n.open(t, "/process.Process/Start", s.envd("Connect-Timeout-Ms", "90000"),
			bash("echo before; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo after; exit 7"))
		ev, _, end := st.next()
		if end || ev.Event.Start == nil {
			t.Fatalf("first message is not the start event: %+v", ev)
		}
		pid := ev.Event.Start.Pid
		if ev, _, _ := st.next(); ev.Event.Data == nil || string(ev.Event.Data.Stdout) != "before\n" {
			t.Fatalf("second message: %+v", ev)
		}
		st.close() // the SDK's client went away

		// Another call completes in between: the server has had the
		// time to act on the drop.
		if _, msgs, end := n.connectStream(t, "/process.Process/Start", s.envd(), bash("true")); string(end) != "{}" || len(msgs) < 2 {
			t.Fatalf("a second process: %s %s", msgs, end)
		}
		if !n.listed(t, s, pid) {
			t.Fatalf("pid %d is not listed after its stream was dropped", pid)
		}
		for _, sel := range []string{`{"process":{"pid":` + strconv.Itoa(pid) + `}}`} {
			c := n.open(t, "/process.Process/Connect", s.envd(), sel)
			ev, _, end := c.next()
			if end || ev.Event.Start == nil || ev.Event.Start.Pid != pid {
				t.Fatalf("Connect: first message %+v", ev)
			}
			n.touch(t, s, "%2Ftmp%2Fgo")
			got := c.rest(&streamed{pid: pid})
			if got.final != "{}" || got.end == nil || got.end.Event.End.ExitCode != 7 || !got.end.Event.End.Exited || got.stdout != "after\n" {
				t.Fatalf("Connect: %+v (end %+v)", got, got.end)
			}
		}
		if n.listed(t, s, pid) {
			r := n.connectUnary(t, "/process.Process/List", s.envd(), `{}`)
			t.Errorf("pid %d still listed after its end: %s", pid, r.body)
		}
		if _, _, end := n.connectStream(t, "/process.Process/Connect", s.envd(), `{"process":{"pid":`+strconv.Itoa(pid)+`}}`); !strings.Contains(string(end), "not_found") {
			t.Errorf("Connect to an ended process: %s", end)
		}
	})

	t.Run("keepalives", func(t *testing.T) {
		// Asked for every second: the stream of a silent process gets
		// them; the process ends when the test has seen one.
		st := n.open(t, "/process.Process/Start", s.envd("Keepalive-Ping-Interval", "1"),
			bash("while [ ! -e /tmp/ka ]; do sleep 0.05; done; echo done"))
		got := &streamed{}
		for got.keepalives == 0 {
			ev, raw, end := st.next()
			if end || ev.Event.End != nil || ev.Event.Data != nil {
				t.Fatalf("before any keepalive: %s", raw)
			}
			if ev.Event.Keepalive != nil {
				got.keepalives++
			}
		}
		n.touch(t, s, "%2Ftmp%2Fka")
		if st.rest(got); got.final != "{}" || got.end == nil || got.stdout != "done\n" {
			t.Fatalf("after the keepalive: %+v", got)
		}

		// Not asked for: none (the process is silent for 2 s).
		_, msgs, end := n.connectStream(t, "/process.Process/Start", s.envd(), bash("sleep 2; echo done"))
		if string(end) != "{}" {
			t.Fatalf("without keepalives: %s", end)
		}
		for _, m := range msgs {
			if strings.Contains(string(m), "keepalive") {
				t.Errorf("a keepalive nobody asked for: %s", m)
			}
		}

		// Connect takes the header too.
		st = n.open(t, "/process.Process/Start", s.envd(), bash("while [ ! -e /tmp/ka2 ]; do sleep 0.05; done"))
		ev, _, _ := st.next()
		c := n.open(t, "/process.Process/Connect", s.envd("Keepalive-Ping-Interval", "1"), `{"process":{"pid":`+strconv.Itoa(ev.Event.Start.Pid)+`}}`)
		c.next() // the start event
		for {
			ev, raw, end := c.next()
			if end || ev.Event.End != nil {
				t.Fatalf("Connect: no keepalive before %s", raw)
			}
			if ev.Event.Keepalive != nil {
				break
			}
		}
		n.touch(t, s, "%2Ftmp%2Fka2")
		if got := c.rest(&streamed{}); got.final != "{}" || got.end == nil {
			t.Fatalf("Connect after the keepalive: %+v", got)
		}
		st.rest(&streamed{})
	})
}
