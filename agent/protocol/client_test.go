package protocol_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// fakeAgent is the agent end of a net.Pipe, driven by the test. It reads
// the host's frames in the background so the host never blocks writing.
type fakeAgent struct {
	t      *testing.T
	conn   net.Conn
	wmu    sync.Mutex
	frames chan protocol.Frame
	gone   chan struct{} // closed when the host's side is closed
}

// newFake connects a Client to a fake agent. Both are closed at cleanup,
// and Close must not hang.
func newFake(t *testing.T) (*protocol.Client, *fakeAgent) {
	t.Helper()
	host, agent := net.Pipe()
	a := &fakeAgent{t: t, conn: agent, frames: make(chan protocol.Frame, 1024), gone: make(chan struct{})}
	go func() {
		defer close(a.gone)
		for {
			f, err := protocol.ReadFrame(agent)
			if err != nil {
				return
			}
			a.frames <- f
		}
	}()
	c := protocol.NewClient(host)
	t.Cleanup(func() {
		closed := make(chan struct{})
		go func() { c.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(2 * time.Second):
			t.Errorf("Client.Close hung")
			agent.Close()
			host.Close()
		}
		agent.Close()
		<-a.gone
	})
	return c, a
}

// send writes a frame to the host, giving up after a while (the host may
// have stopped reading, which is fine).
func (a *fakeAgent) send(f protocol.Frame) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	a.conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
	return protocol.WriteFrame(a.conn, f)
}

func (a *fakeAgent) raw(b []byte) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	a.conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
	_, err := a.conn.Write(b)
	return err
}

func (a *fakeAgent) hello() {
	a.t.Helper()
	if err := a.send(protocol.Frame{Type: protocol.THello, Payload: protocol.Encode(protocol.Hello{Version: protocol.Version, Agent: "fake", PID: 1})}); err != nil {
		a.t.Fatalf("send hello: %v", err)
	}
}

// expect waits for the host's next frame and checks its type.
func (a *fakeAgent) expect(typ protocol.Type) protocol.Frame {
	a.t.Helper()
	select {
	case f := <-a.frames:
		if f.Type != typ {
			a.t.Fatalf("host sent %s on stream %d, want %s", f.Type, f.Stream, typ)
		}
		return f
	case <-time.After(5 * time.Second):
		a.t.Fatalf("no %s frame from the host", typ)
	}
	return protocol.Frame{}
}

// expectRequest waits for a request frame and decodes it.
func (a *fakeAgent) expectRequest() (uint32, protocol.Request) {
	a.t.Helper()
	f := a.expect(protocol.TRequest)
	var req protocol.Request
	if err := protocol.Decode(f.Payload, &req); err != nil {
		a.t.Fatalf("host sent a bad request: %v", err)
	}
	return f.Stream, req
}

func (a *fakeAgent) respond(stream uint32, r protocol.Response) {
	a.t.Helper()
	if err := a.send(protocol.Frame{Type: protocol.TResponse, Stream: stream, Payload: protocol.Encode(r)}); err != nil {
		a.t.Fatalf("send response: %v", err)
	}
}

// answerHealth answers the next request, which must be a health check.
func (a *fakeAgent) answerHealth() {
	a.t.Helper()
	id, req := a.expectRequest()
	if req.Op != protocol.OpHealth {
		a.t.Fatalf("got %s request, want health", req.Op)
	}
	a.respond(id, protocol.Response{Health: &protocol.Health{UptimeMS: 1}})
}

// result of a call made in the background.
type result struct {
	n   int64
	err error
}

// async runs fn in the background and returns where its result arrives.
func async(fn func() (int64, error)) <-chan result {
	ch := make(chan result, 1)
	go func() {
		n, err := fn()
		ch <- result{n, err}
	}()
	return ch
}

func wait(t *testing.T, ch <-chan result, what string) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatalf("%s hung", what)
	}
	return result{}
}

func healthAsync(c *protocol.Client, d time.Duration) <-chan result {
	return async(func() (int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := c.Health(ctx)
		return 0, err
	})
}

// checkHealthy asserts the connection still serves requests.
func checkHealthy(t *testing.T, c *protocol.Client, a *fakeAgent) {
	t.Helper()
	ch := healthAsync(c, 3*time.Second)
	a.answerHealth()
	if r := wait(t, ch, "health"); r.err != nil {
		t.Fatalf("connection no longer works: %v", r.err)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("connection failed: %v", err)
	}
}

// checkFailed asserts the connection has ended, quickly and for good, and
// that the host closed its side.
func checkFailed(t *testing.T, c *protocol.Client, a *fakeAgent) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("connection did not end")
	}
	if c.Err() == nil {
		t.Fatal("Err is nil after the connection ended")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := c.Health(ctx); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("request on a failed connection: got %v, want the connection's error at once", err)
	}
	select {
	case <-a.gone:
	case <-time.After(2 * time.Second):
		t.Fatal("host did not close the connection after a violation")
	}
}

func TestClientHello(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	h, err := c.WaitHello(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != protocol.Version || h.Agent != "fake" || h.PID != 1 {
		t.Fatalf("hello %+v", h)
	}
	checkHealthy(t, c, a)
}

func TestClientBadHello(t *testing.T) {
	tests := []struct {
		name  string
		frame protocol.Frame
	}{
		{"wrong version", protocol.Frame{Type: protocol.THello, Payload: []byte(`{"version":99}`)}},
		{"not json", protocol.Frame{Type: protocol.THello, Payload: []byte(`hello`)}},
		{"unknown field", protocol.Frame{Type: protocol.THello, Payload: []byte(`{"version":1,"x":1}`)}},
		{"stdout first", protocol.Frame{Type: protocol.TStdout, Payload: []byte(`hi`)}},
		{"response on stream 0", protocol.Frame{Type: protocol.TResponse, Payload: []byte(`{}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, a := newFake(t)
			a.send(tt.frame)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if _, err := c.WaitHello(ctx); err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("WaitHello: got %v, want a protocol error", err)
			}
			checkFailed(t, c, a)
		})
	}
}

// (a) garbage after the hello fails the connection and pending requests.
func TestHostileGarbageAfterHello(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	ch := healthAsync(c, 5*time.Second)
	a.expectRequest()
	go a.raw([]byte("garbage, not a frame header at all\n"))
	r := wait(t, ch, "health")
	if !errors.Is(r.err, protocol.ErrBadType) {
		t.Fatalf("pending request: got %v, want ErrBadType", r.err)
	}
	checkFailed(t, c, a)
}

// (a') a well-framed response with a bad payload fails that request.
func TestHostileBadResponsePayload(t *testing.T) {
	for _, payload := range []string{`{{{`, `{"pid":1,"evil":true}`, `{"pid":-5}`, `{"info":{"name":"../etc"}}`, `{"health":{"uptime_ms":1}} trailing`} {
		t.Run(payload, func(t *testing.T) {
			c, a := newFake(t)
			a.hello()
			ch := healthAsync(c, 5*time.Second)
			id, _ := a.expectRequest()
			a.send(protocol.Frame{Type: protocol.TResponse, Stream: id, Payload: []byte(payload)})
			if r := wait(t, ch, "health"); r.err == nil {
				t.Fatal("bad response accepted")
			}
		})
	}
}

// (b) a header announcing a huge payload ends the connection at once.
func TestHostileHugeFrame(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	var buf bytes.Buffer
	ch := async(func() (int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return c.Get(ctx, "f", &buf, 1<<20)
	})
	id, _ := a.expectRequest()
	go a.raw(header(protocol.TData, id, ^uint32(0)))
	r := wait(t, ch, "get")
	if !errors.Is(r.err, protocol.ErrFrameTooLarge) {
		t.Fatalf("get: got %v, want ErrFrameTooLarge", r.err)
	}
	if buf.Len() != 0 {
		t.Fatalf("get wrote %d bytes", buf.Len())
	}
	checkFailed(t, c, a)
}

// (c) a second hello ends the connection.
func TestHostileSecondHello(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	ch := healthAsync(c, 5*time.Second)
	a.expectRequest()
	a.hello()
	if r := wait(t, ch, "health"); r.err == nil || errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("pending request: got %v, want a protocol error", r.err)
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "hello") {
		t.Fatalf("Err: got %v, want one about the hello", err)
	}
	checkFailed(t, c, a)
}

// startExec starts an exec against the fake agent and acknowledges it.
func startExec(t *testing.T, c *protocol.Client, a *fakeAgent, stdout, stderr io.Writer) (airlock.Process, uint32) {
	t.Helper()
	type started struct {
		p   airlock.Process
		err error
	}
	ch := make(chan started, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p, err := c.Exec(ctx, protocol.ExecRequest{Argv: []string{"prog"}}, stdout, stderr)
		ch <- started{p, err}
	}()
	id, req := a.expectRequest()
	if req.Op != protocol.OpExec || req.Exec == nil || req.Exec.Argv[0] != "prog" {
		t.Fatalf("got request %+v", req)
	}
	a.respond(id, protocol.Response{PID: 42})
	select {
	case s := <-ch:
		if s.err != nil {
			t.Fatalf("Exec: %v", s.err)
		}
		if s.p.PID() != 42 {
			t.Fatalf("PID %d, want 42", s.p.PID())
		}
		return s.p, id
	case <-time.After(5 * time.Second):
		t.Fatal("Exec hung")
	}
	return nil, 0
}

func waitProcess(t *testing.T, p airlock.Process) (protocol.ExitStatus, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := p.Wait(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("Wait hung")
	}
	return st, err
}

func TestClientExec(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	var stdout, stderr bytes.Buffer
	p, id := startExec(t, c, a, &stdout, &stderr)
	a.send(protocol.Frame{Type: protocol.TStdout, Stream: id, Payload: []byte("out")})
	a.send(protocol.Frame{Type: protocol.TStderr, Stream: id, Payload: []byte("err")})
	a.send(protocol.Frame{Type: protocol.TStdout, Stream: id, Payload: []byte("put")})
	a.send(protocol.Frame{Type: protocol.TExit, Stream: id, Payload: protocol.Encode(protocol.ExitStatus{Code: 3})})
	st, err := waitProcess(t, p)
	if err != nil || st.Code != 3 {
		t.Fatalf("Wait: %+v, %v", st, err)
	}
	if stdout.String() != "output" || stderr.String() != "err" {
		t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	checkHealthy(t, c, a)
}

func TestClientProcessInput(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	p, id := startExec(t, c, a, nil, nil)
	big := bytes.Repeat([]byte("z"), protocol.MaxPayload+10)
	if n, err := p.Write(big); err != nil || n != len(big) {
		t.Fatalf("Write: %d, %v", n, err)
	}
	f1 := a.expect(protocol.TStdin)
	f2 := a.expect(protocol.TStdin)
	if f1.Stream != id || f2.Stream != id || len(f1.Payload) != protocol.MaxPayload || len(f2.Payload) != 10 {
		t.Fatalf("stdin frames: %d bytes on %d, %d bytes on %d", len(f1.Payload), f1.Stream, len(f2.Payload), f2.Stream)
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	a.expect(protocol.TStdinClose)
	for _, bad := range []int{0, -1, 65} {
		if err := p.Signal(bad); err == nil {
			t.Errorf("Signal(%d) accepted", bad)
		}
	}
	if err := p.Signal(15); err != nil {
		t.Fatal(err)
	}
	f := a.expect(protocol.TSignal)
	var sr protocol.SignalRequest
	if err := protocol.Decode(f.Payload, &sr); err != nil || sr.Signal != 15 {
		t.Fatalf("signal frame %q: %v", f.Payload, err)
	}
	a.send(protocol.Frame{Type: protocol.TExit, Stream: id, Payload: protocol.Encode(protocol.ExitStatus{Code: 143, Signal: 15})})
	if st, err := waitProcess(t, p); err != nil || st.Signal != 15 {
		t.Fatalf("Wait: %+v, %v", st, err)
	}
}

func TestClientExecRefusesBadRequest(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, req := range []protocol.ExecRequest{{}, {Argv: []string{""}}, {Argv: []string{"a"}, Env: []string{"NOEQUALS"}}, {Argv: []string{"a"}, TimeoutMS: -1}} {
		if _, err := c.Exec(ctx, req, nil, nil); err == nil {
			t.Errorf("Exec(%+v) accepted", req)
		}
	}
	select {
	case f := <-a.frames:
		t.Fatalf("a refused exec still sent a %s frame", f.Type)
	default:
	}
}

// (d) an exit status out of range fails that exec, not the connection.
func TestHostileExitCode(t *testing.T) {
	for _, payload := range []string{`{"code":9999}`, `{"code":-1}`, `{"code":0,"signal":99}`, `{"code":0,"x":1}`, `garbage`} {
		t.Run(payload, func(t *testing.T) {
			c, a := newFake(t)
			a.hello()
			p, id := startExec(t, c, a, nil, nil)
			a.send(protocol.Frame{Type: protocol.TExit, Stream: id, Payload: []byte(payload)})
			st, err := waitProcess(t, p)
			if err == nil {
				t.Fatalf("Wait accepted exit %s as %+v", payload, st)
			}
			checkHealthy(t, c, a)
		})
	}
}

// An exec stream must end with exit or error; other frames fail it.
func TestHostileExecFrames(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	p, id := startExec(t, c, a, nil, nil)
	a.send(protocol.Frame{Type: protocol.TData, Stream: id, Payload: []byte("x")})
	if _, err := waitProcess(t, p); err == nil {
		t.Fatal("data frame on an exec stream accepted")
	}
	checkHealthy(t, c, a)

	p, id = startExec(t, c, a, nil, nil)
	a.send(protocol.Frame{Type: protocol.TError, Stream: id, Payload: protocol.Encode(protocol.ErrorMessage{Code: "io", Message: "boom"})})
	_, err := waitProcess(t, p)
	var re *protocol.RemoteError
	if !errors.As(err, &re) || re.Code != "io" {
		t.Fatalf("Wait: got %v, want RemoteError io", err)
	}
}

// Frames only the host may send end the connection.
func TestHostileHostOnlyFrames(t *testing.T) {
	for _, typ := range []protocol.Type{protocol.TRequest, protocol.TStdin, protocol.TStdinClose, protocol.TSignal} {
		t.Run(typ.String(), func(t *testing.T) {
			c, a := newFake(t)
			a.hello()
			ch := healthAsync(c, 5*time.Second)
			id, _ := a.expectRequest()
			a.send(protocol.Frame{Type: typ, Stream: id, Payload: []byte(`{}`)})
			if r := wait(t, ch, "health"); r.err == nil {
				t.Fatal("pending request succeeded")
			}
			checkFailed(t, c, a)
		})
	}
}

// (e) frames for streams the host never opened are ignored.
func TestHostileUnknownStream(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	for _, id := range []uint32{2, 1001, ^uint32(0)} {
		for _, typ := range []protocol.Type{protocol.TStdout, protocol.TStderr, protocol.TData, protocol.TDataEnd, protocol.TExit, protocol.TResponse, protocol.TError} {
			if err := a.send(protocol.Frame{Type: typ, Stream: id, Payload: []byte("junk")}); err != nil {
				t.Fatalf("host stopped reading: %v", err)
			}
		}
	}
	checkHealthy(t, c, a)
}

// (f) a get that sends more than asked fails, and writes no more than max.
func TestHostileGetTooMuch(t *testing.T) {
	tests := []struct {
		name   string
		chunks []int
	}{
		{"one big frame", []int{11}},
		{"second frame crosses", []int{8, 8}},
		{"many frames", []int{5, 5, 1, 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, a := newFake(t)
			a.hello()
			var buf bytes.Buffer
			ch := async(func() (int64, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				return c.Get(ctx, "f", &buf, 10)
			})
			id, req := a.expectRequest()
			if req.Op != protocol.OpGet || req.Max != 10 {
				t.Fatalf("request %+v", req)
			}
			for _, n := range tt.chunks {
				a.send(protocol.Frame{Type: protocol.TData, Stream: id, Payload: bytes.Repeat([]byte("d"), n)})
			}
			a.send(protocol.Frame{Type: protocol.TDataEnd, Stream: id})
			r := wait(t, ch, "get")
			if r.err == nil {
				t.Fatalf("get of more than max succeeded with %d bytes", r.n)
			}
			if buf.Len() > 10 {
				t.Fatalf("get wrote %d bytes, more than max", buf.Len())
			}
			checkHealthy(t, c, a)
		})
	}
}

func TestClientGet(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	var buf bytes.Buffer
	ch := async(func() (int64, error) {
		return c.Get(context.Background(), "f", &buf, 10)
	})
	id, _ := a.expectRequest()
	a.send(protocol.Frame{Type: protocol.TData, Stream: id, Payload: []byte("hello")})
	a.send(protocol.Frame{Type: protocol.TData, Stream: id, Payload: []byte("world")})
	a.send(protocol.Frame{Type: protocol.TDataEnd, Stream: id})
	if r := wait(t, ch, "get"); r.err != nil || r.n != 10 || buf.String() != "helloworld" {
		t.Fatalf("get: %d, %v, %q", r.n, r.err, buf.String())
	}
	// A remote error is a RemoteError.
	ch = async(func() (int64, error) { return c.Get(context.Background(), "g", io.Discard, 10) })
	id, _ = a.expectRequest()
	a.send(protocol.Frame{Type: protocol.TError, Stream: id, Payload: protocol.Encode(protocol.ErrorMessage{Code: "not_found", Message: "no"})})
	var re *protocol.RemoteError
	if r := wait(t, ch, "get"); !errors.As(r.err, &re) || re.Code != "not_found" {
		t.Fatalf("get: got %v, want RemoteError not_found", r.err)
	}
}

func TestClientPut(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	data := bytes.Repeat([]byte("0123456789"), protocol.MaxPayload/5)
	ch := async(func() (int64, error) {
		return c.Put(context.Background(), "dir/f", 0o600, bytes.NewReader(data))
	})
	id, req := a.expectRequest()
	if req.Op != protocol.OpPut || req.Path != "dir/f" || req.Mode != 0o600 {
		t.Fatalf("request %+v", req)
	}
	var got []byte
	for {
		select {
		case f := <-a.frames:
			if f.Stream != id {
				t.Fatalf("frame on stream %d", f.Stream)
			}
			switch f.Type {
			case protocol.TData:
				got = append(got, f.Payload...)
				continue
			case protocol.TDataEnd:
			default:
				t.Fatalf("put sent %s", f.Type)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("put stalled")
		}
		break
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("agent got %d bytes, want %d", len(got), len(data))
	}
	a.respond(id, protocol.Response{Written: int64(len(got))})
	if r := wait(t, ch, "put"); r.err != nil || r.n != int64(len(data)) {
		t.Fatalf("put: %d, %v", r.n, r.err)
	}
}

// errReader fails after its data.
type errReader struct{ data []byte }

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, errors.New("disk on fire")
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestClientPutAbort(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	ch := async(func() (int64, error) {
		return c.Put(context.Background(), "f", 0, &errReader{data: []byte("partial")})
	})
	id, _ := a.expectRequest()
	a.expect(protocol.TData)
	f := a.expect(protocol.TError)
	if f.Stream != id {
		t.Fatalf("abort on stream %d, want %d", f.Stream, id)
	}
	if r := wait(t, ch, "put"); r.err == nil || !strings.Contains(r.err.Error(), "disk on fire") {
		t.Fatalf("put: got %v, want the reader's error", r.err)
	}
}

// slowReader returns its data after release is closed.
type slowReader struct {
	release chan struct{}
	data    []byte
}

func (r *slowReader) Read(p []byte) (int, error) {
	<-r.release
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// streamBuffer is how many frames protocol.Client queues for one stream
// before its read loop waits for the stream's reader.
const streamBuffer = 16

// flood sends 100 frames of payload on stream id in the background, and
// waits until the host has taken more of them than one stream queues (so
// the read loop now waits for the stream) or the flood has ended. It
// returns a channel closed when the flood ends (all sent, or a send gave
// up).
func (a *fakeAgent) flood(t *testing.T, id uint32, payload string) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	var sent atomic.Int32
	go func() {
		defer close(done)
		for i := 0; i < 100; i++ {
			if a.send(protocol.Frame{Type: protocol.TStdout, Stream: id, Payload: []byte(payload)}) != nil {
				return
			}
			sent.Add(1) // net.Pipe: the host has read the frame
		}
	}()
	testreq.Eventually(t, 5*time.Second, fmt.Sprintf("the host to take more than %d flood frames on stream %d", streamBuffer, id), func() bool {
		select {
		case <-done:
			return true
		default:
			return sent.Load() > streamBuffer
		}
	})
	return done
}

// An agent that floods a put's stream while the host is busy reading the
// file fails that put, and must not wedge the connection.
func TestHostileFloodDuringPut(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	r := &slowReader{release: make(chan struct{}), data: []byte("x")}
	ch := async(func() (int64, error) {
		return c.Put(context.Background(), "f", 0, r)
	})
	id, _ := a.expectRequest()
	flooded := a.flood(t, id, "flood")
	close(r.release)
	if res := wait(t, ch, "put"); res.err == nil {
		t.Fatal("put succeeded on a flooded stream")
	}
	select {
	case <-flooded:
	case <-time.After(3 * time.Second):
		t.Fatal("host stopped reading frames after the put failed")
	}
	for len(a.frames) > 0 {
		<-a.frames // the put's data and end
	}
	checkHealthy(t, c, a)
}

// Close must return even while an exec's output writer is stuck.
func TestClientCloseWithStuckWriter(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	release := make(chan struct{})
	defer close(release)
	stuck := make(chan struct{})
	var once sync.Once
	w := writerFunc(func(b []byte) (int, error) {
		once.Do(func() { close(stuck) })
		<-release
		return len(b), nil
	})
	p, id := startExec(t, c, a, w, nil)
	a.flood(t, id, "x")
	select {
	case <-stuck:
	case <-time.After(5 * time.Second):
		t.Fatal("the output writer was never called")
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(3 * time.Second):
		t.Fatal("Close hung while an output writer was stuck")
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	_ = p
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// An agent that goes away fails pending requests with ErrClosed.
func TestClientAgentGone(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	p, _ := startExec(t, c, a, nil, nil)
	ch := healthAsync(c, 5*time.Second)
	a.expectRequest()
	a.conn.Close()
	if r := wait(t, ch, "health"); !errors.Is(r.err, protocol.ErrClosed) {
		t.Fatalf("pending request: got %v, want ErrClosed", r.err)
	}
	if _, err := waitProcess(t, p); !errors.Is(err, protocol.ErrClosed) {
		t.Fatalf("Wait: got %v, want ErrClosed", err)
	}
	if _, err := c.Stat(context.Background(), "x"); !errors.Is(err, protocol.ErrClosed) {
		t.Fatalf("Stat after close: got %v, want ErrClosed", err)
	}
}

// A silent agent leaves requests to their contexts.
func TestClientSilentAgent(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	ch := async(func() (int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := c.Stat(ctx, "x")
		return 0, err
	})
	a.expectRequest()
	if r := wait(t, ch, "stat"); !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want DeadlineExceeded", r.err)
	}
	// A late answer to the abandoned request is ignored.
	a.respond(1, protocol.Response{})
	checkHealthy(t, c, a)
}

// Concurrent requests get distinct odd stream IDs and their own answers.
func TestClientConcurrentStreams(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			name := "f" + strings.Repeat("x", i)
			info, err := c.Stat(ctx, name)
			if err == nil && info.Name != name {
				err = errors.New("got the answer for " + info.Name + ", want " + name)
			}
			errs <- err
		}()
	}
	seen := map[uint32]bool{}
	reqs := map[uint32]string{}
	for i := 0; i < n; i++ {
		id, req := a.expectRequest()
		if id%2 == 0 || seen[id] {
			t.Fatalf("stream ID %d is even or reused", id)
		}
		seen[id] = true
		reqs[id] = req.Path
	}
	for id, p := range reqs { // answer in map order, not request order
		a.respond(id, protocol.Response{Info: &protocol.FileInfo{Name: p}})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
