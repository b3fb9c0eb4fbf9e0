package rest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
)

// sseEvent is one server-sent event as a test reads it.
type sseEvent struct {
	name string
	data string
}

// readEvents reads a whole event stream.
func readEvents(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	var ev sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.name != "" {
				out = append(out, ev)
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data += strings.TrimPrefix(line, "data: ")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read stream: %v", err)
	}
	return out
}

// streamPost posts body to path as A asking for an event stream.
func (e *env) streamPost(path, body string) *http.Response {
	e.t.Helper()
	return e.do(req{method: "POST", path: path, key: e.keyA, body: body,
		header: map[string]string{"Content-Type": "application/json", "Accept": "text/event-stream"}})
}

// Output that comes before the start event follows it; a character split
// between two chunks arrives whole; the final event is not held to the
// stream's bound (it carries the recorded result, bounded by itself).
func TestExecStreamEvents(t *testing.T) {
	big := strings.Repeat("x", 256<<10)
	sess := &fakeSessions{exec: func(ctx context.Context, req airlock.SessionExecRequest, obs airlock.ExecObserver) (*airlock.Execution, error) {
		obs.Stdout([]byte("early "))
		obs.Started("e1", 42)
		obs.Stdout([]byte("h\xc3"))
		obs.Stdout([]byte("\xa9llo"))
		obs.Stderr([]byte("\xff\xfe"))
		obs.Stdout([]byte("\xe2\x82")) // never completed: sent as it is at the end
		return &airlock.Execution{ID: "e1", Status: airlock.StatusCompleted, Stdout: big}, nil
	}}
	e := newEnv(t, withSessions(sess), func(c *rest.Config) { c.StreamBufferBytes = 64 << 10 })
	resp := e.streamPost("/v1/sessions/s1/exec", `{"shell":"true"}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := readEvents(t, resp.Body)
	var got []string
	for _, ev := range evs {
		if ev.name == "exit" {
			var x airlock.Execution
			if err := json.Unmarshal([]byte(ev.data), &x); err != nil || x.Stdout != big {
				t.Errorf("exit event: %v, %d bytes of stdout", err, len(x.Stdout))
			}
			got = append(got, "exit")
			continue
		}
		got = append(got, ev.name+" "+ev.data)
	}
	want := []string{
		`start {"execution_id":"e1","pid":42}`,
		`stdout {"data":"early "}`,
		`stdout {"data":"h"}`,
		`stdout {"data":"éllo"}`,
		`stderr {"data_b64":"//4="}`,
		`stdout {"data_b64":"4oI="}`,
		`exit`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A call refused before its program starts is a plain problem, not a
// stream; a failure mid-stream is an error event.
func TestExecStreamProblems(t *testing.T) {
	sess := &fakeSessions{}
	e := newEnv(t, withSessions(sess))
	sess.exec = func(ctx context.Context, req airlock.SessionExecRequest, obs airlock.ExecObserver) (*airlock.Execution, error) {
		return nil, airlock.Problem(airlock.ECONFLICT, "session-ended", "session s1 has ended")
	}
	wantProblem(t, e.streamPost("/v1/sessions/s1/exec", `{"shell":"true"}`), 409, "session-ended")

	sess.exec = func(ctx context.Context, req airlock.SessionExecRequest, obs airlock.ExecObserver) (*airlock.Execution, error) {
		obs.Started("e2", 9)
		obs.Stdout([]byte("partial"))
		return nil, airlock.Problem(airlock.EUNAVAILABLE, "sandbox-failed", "the session's sandbox did not answer")
	}
	resp := e.streamPost("/v1/sessions/s1/exec", `{"shell":"true"}`)
	evs := readEvents(t, resp.Body)
	if len(evs) != 3 || evs[0].name != "start" || evs[1].name != "stdout" || evs[2].name != "error" ||
		!strings.Contains(evs[2].data, "sandbox-failed") {
		t.Errorf("events %+v", evs)
	}
}

// dialStalled opens a connection whose receive buffer is as small as the
// kernel allows, sends a streaming request on it and never reads: the
// kernel's buffers fill and the server's writes block.
func dialStalled(t *testing.T, base, path, key, body string) net.Conn {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", path, u.Host, key, len(body), body)
	return conn
}

// waitLog waits until the server's log has a line with every one of parts.
func (e *env) waitLog(t *testing.T, within time.Duration, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, line := range strings.Split(e.logs.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within %v; log:\n%s", parts, within, e.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// floodingExec is a program that writes total bytes of output as fast as
// the observer takes them, then keeps running until release is closed;
// it reports how long the longest observer call took and whether its
// context was canceled.
type floodingExec struct {
	total   int
	release chan struct{}

	mu      sync.Mutex
	longest time.Duration
	wrote   chan struct{} // closed once all output is handed over
	ended   chan error    // the program's end: its context's error
}

func newFloodingExec(total int) *floodingExec {
	return &floodingExec{total: total, release: make(chan struct{}), wrote: make(chan struct{}), ended: make(chan error, 1)}
}

func (f *floodingExec) exec(ctx context.Context, req airlock.SessionExecRequest, obs airlock.ExecObserver) (*airlock.Execution, error) {
	obs.Started("e-flood", 1)
	f.pump(obs.Stdout)
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return &airlock.Execution{ID: "e-flood", Status: airlock.StatusCompleted}, nil
}

func (f *floodingExec) cell(ctx context.Context, req airlock.RunCellRequest, obs airlock.CellObserver) (*airlock.CellResult, error) {
	obs.Started("c1")
	f.pump(obs.Stdout)
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return &airlock.CellResult{ContextID: "c1", Outputs: []airlock.CellOutput{}}, nil
}

func (f *floodingExec) pump(out func([]byte)) {
	chunk := []byte(strings.Repeat("0123456789abcdef", 2048)) // 32 KiB
	for n := 0; n < f.total; n += len(chunk) {
		start := time.Now()
		out(chunk)
		f.mu.Lock()
		f.longest = max(f.longest, time.Since(start))
		f.mu.Unlock()
	}
	close(f.wrote)
}

// wait keeps the program running until it is released or its context is
// canceled, and reports which.
func (f *floodingExec) wait(ctx context.Context) error {
	select {
	case <-f.release:
	case <-ctx.Done():
	}
	f.ended <- ctx.Err()
	return ctx.Err()
}

// check waits for the whole output to be handed over without an observer
// call ever blocking for long.
func (f *floodingExec) check(t *testing.T) {
	t.Helper()
	select {
	case <-f.wrote:
	case <-time.After(60 * time.Second):
		t.Fatalf("the observer blocked: the output was not handed over within 60s")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.longest > 5*time.Second {
		t.Errorf("an observer call took %v", f.longest)
	}
}

// A client that never reads: whether the bounded queue overflows or a
// write misses its deadline, the observer never blocks, the stream is
// dropped, the handler ends by itself and the program runs on to its end
// (its context is not canceled).
func TestStalledStreamIsDropped(t *testing.T) {
	for _, tt := range []struct {
		name    string
		buffer  int
		timeout time.Duration
		reason  string
	}{
		{"queue overflows", 64 << 10, time.Minute, "did not keep up"},
		{"write times out", 1 << 30, 300 * time.Millisecond, "timeout"},
	} {
		for _, kind := range []string{"exec", "cell"} {
			t.Run(tt.name+"/"+kind, func(t *testing.T) {
				flood := newFloodingExec(32 << 20)
				sess := &fakeSessions{exec: flood.exec, cell: flood.cell}
				e := newEnv(t, withSessions(sess), func(c *rest.Config) {
					c.StreamBufferBytes = tt.buffer
					c.StreamWriteTimeout = tt.timeout
				})
				path, body := "/v1/sessions/s1/exec", `{"shell":"yes"}`
				if kind == "cell" {
					path, body = "/v1/sessions/s1/contexts/c1/run", `{"code":"while True: print(1)"}`
				}
				dialStalled(t, e.srv.URL, path, e.keyA, body)
				flood.check(t)
				e.waitLog(t, time.Minute, "event stream dropped", "path="+path, tt.reason)
				e.waitLog(t, time.Minute, `msg="http request"`, "path="+path)
				// The program is still running, and ends as it would have.
				select {
				case err := <-flood.ended:
					t.Fatalf("the program ended when the stream was dropped: %v", err)
				default:
				}
				close(flood.release)
				select {
				case err := <-flood.ended:
					if err != nil {
						t.Errorf("the program's context was canceled: %v", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("the program did not end")
				}
			})
		}
	}
}

// A client that goes away mid-stream still cancels the call, as before.
func TestStreamClientGone(t *testing.T) {
	started := make(chan struct{})
	ended := make(chan error, 1)
	sess := &fakeSessions{exec: func(ctx context.Context, req airlock.SessionExecRequest, obs airlock.ExecObserver) (*airlock.Execution, error) {
		obs.Started("e1", 1)
		close(started)
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	}}
	e := newEnv(t, withSessions(sess))
	conn := dialStalled(t, e.srv.URL, "/v1/sessions/s1/exec", e.keyA, `{"shell":"sleep 100"}`)
	<-started
	conn.Close()
	select {
	case err := <-ended:
		if err == nil {
			t.Error("no context error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call was not canceled when the client went away")
	}
	e.waitLog(t, time.Minute, `msg="http request"`, "path=/v1/sessions/s1/exec")
}
