package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/airlockhq/airlock"
)

// ErrClosed is returned once the connection to the agent is gone.
var ErrClosed = errors.New("protocol: connection closed")

// RemoteError is an error the agent reported for a request.
type RemoteError struct{ ErrorMessage }

func (e *RemoteError) Error() string { return "agent: " + e.Code + ": " + e.Message }

// Client is the host side of a connection to one agent. It is safe for
// concurrent use; each request runs on its own stream.
type Client struct {
	conn io.ReadWriteCloser

	wmu sync.Mutex // serialises frame writes

	mu      sync.Mutex
	next    uint32
	streams map[uint32]*stream
	err     error // set once, when the read loop ends

	hello     chan Hello
	done      chan struct{}
	closing   chan struct{} // closed by Close, so the read loop never blocks it
	closeOnce sync.Once
}

// stream receives the frames of one request.
type stream struct {
	frames chan Frame
	gone   chan struct{} // closed once the request stops reading frames
}

// NewClient starts reading frames from conn. Close it when done.
func NewClient(conn io.ReadWriteCloser) *Client {
	c := &Client{
		conn:    conn,
		next:    1,
		streams: map[uint32]*stream{},
		hello:   make(chan Hello, 1),
		done:    make(chan struct{}),
		closing: make(chan struct{}),
	}
	go c.readLoop()
	return c
}

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, or nil while it is up.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection. Pending requests fail with ErrClosed.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { close(c.closing) })
	err := c.conn.Close()
	<-c.done
	return err
}

// WaitHello waits for the agent's Hello frame.
func (c *Client) WaitHello(ctx context.Context) (Hello, error) {
	select {
	case h := <-c.hello:
		return h, nil
	case <-c.done:
		return Hello{}, fmt.Errorf("waiting for agent hello: %w", c.Err())
	case <-ctx.Done():
		return Hello{}, ctx.Err()
	}
}

func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	streams := c.streams
	c.streams = map[uint32]*stream{}
	c.mu.Unlock()
	for _, s := range streams {
		close(s.frames)
	}
}

func (c *Client) readLoop() {
	defer close(c.done)
	gotHello := false
	for {
		f, err := ReadFrame(c.conn)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
				err = ErrClosed
			}
			c.fail(err)
			c.conn.Close() // the stream is unusable (EOF or a bad frame); unblock writers
			return
		}
		if f.Stream == 0 {
			if f.Type != THello || gotHello {
				c.fail(fmt.Errorf("protocol: unexpected %s frame on stream 0", f.Type))
				c.conn.Close()
				return
			}
			var h Hello
			if err := Decode(f.Payload, &h); err != nil {
				c.fail(err)
				c.conn.Close()
				return
			}
			gotHello = true
			c.hello <- h
			continue
		}
		switch f.Type {
		case TResponse, TStdout, TStderr, TExit, TData, TDataEnd, TError, TWindow:
		default:
			c.fail(fmt.Errorf("protocol: agent sent a %s frame", f.Type))
			c.conn.Close()
			return
		}
		c.mu.Lock()
		s := c.streams[f.Stream]
		c.mu.Unlock()
		if s == nil {
			continue // a stream the host already gave up on
		}
		select {
		case s.frames <- f:
		case <-s.gone: // the request ended while we held its stream
		case <-c.closing:
			c.fail(ErrClosed)
			return
		}
	}
}

// open registers a new stream and sends its request.
func (c *Client) open(req Request) (uint32, *stream, error) {
	return c.openSized(req, 16)
}

// openSized is open with room for size frames queued on the stream.
func (c *Client) openSized(req Request, size int) (uint32, *stream, error) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, nil, err
	}
	id := c.next
	c.next += 2
	s := &stream{frames: make(chan Frame, size), gone: make(chan struct{})}
	c.streams[id] = s
	c.mu.Unlock()
	if err := c.write(Frame{Type: TRequest, Stream: id, Payload: Encode(req)}); err != nil {
		c.forget(id)
		return 0, nil, err
	}
	return id, s, nil
}

func (c *Client) forget(id uint32) {
	c.mu.Lock()
	s := c.streams[id]
	delete(c.streams, id)
	c.mu.Unlock()
	if s != nil {
		close(s.gone)
	}
}

func (c *Client) write(f Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := WriteFrame(c.conn, f); err != nil {
		return fmt.Errorf("protocol: write: %w", err)
	}
	return nil
}

// recv waits for the next frame of a stream.
func (c *Client) recv(ctx context.Context, s *stream) (Frame, error) {
	select {
	case f, ok := <-s.frames:
		if !ok {
			if err := c.Err(); err != nil {
				return Frame{}, err
			}
			return Frame{}, ErrClosed
		}
		return f, nil
	case <-ctx.Done():
		return Frame{}, ctx.Err()
	}
}

// remoteError decodes a TError frame.
func remoteError(f Frame) error {
	var m ErrorMessage
	if err := Decode(f.Payload, &m); err != nil {
		return err
	}
	return &RemoteError{m}
}

// roundTrip sends a request and waits for its single Response.
func (c *Client) roundTrip(ctx context.Context, req Request) (*Response, error) {
	id, s, err := c.open(req)
	if err != nil {
		return nil, err
	}
	defer c.forget(id)
	f, err := c.recv(ctx, s)
	if err != nil {
		return nil, err
	}
	switch f.Type {
	case TResponse:
		var r Response
		if err := Decode(f.Payload, &r); err != nil {
			return nil, err
		}
		return &r, nil
	case TError:
		return nil, remoteError(f)
	}
	return nil, fmt.Errorf("protocol: unexpected %s frame for %s", f.Type, req.Op)
}

// Health asks the agent how it is.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	r, err := c.roundTrip(ctx, Request{Op: OpHealth})
	if err != nil {
		return nil, err
	}
	if r.Health == nil {
		return nil, fmt.Errorf("protocol: health response without health")
	}
	return r.Health, nil
}

// List lists a directory under the workspace.
func (c *Client) List(ctx context.Context, path string) ([]FileInfo, bool, error) {
	r, err := c.roundTrip(ctx, Request{Op: OpList, Path: path})
	if err != nil {
		return nil, false, err
	}
	return r.Entries, r.More, nil
}

// Stat describes one file under the workspace.
func (c *Client) Stat(ctx context.Context, path string) (*FileInfo, error) {
	r, err := c.roundTrip(ctx, Request{Op: OpStat, Path: path})
	if err != nil {
		return nil, err
	}
	if r.Info == nil {
		return nil, fmt.Errorf("protocol: stat response without info")
	}
	return r.Info, nil
}

// Remove removes a file or empty directory under the workspace.
func (c *Client) Remove(ctx context.Context, path string) error {
	_, err := c.roundTrip(ctx, Request{Op: OpRemove, Path: path})
	return err
}

// Shutdown asks the agent to end all processes and exit.
func (c *Client) Shutdown(ctx context.Context) error {
	_, err := c.roundTrip(ctx, Request{Op: OpShutdown})
	return err
}

// Put writes r to a file under the workspace, creating or replacing it.
// The agent writes to a temporary file and renames it, so a failed put
// leaves no partial file.
func (c *Client) Put(ctx context.Context, path string, mode uint32, r io.Reader) (int64, error) {
	id, s, err := c.open(Request{Op: OpPut, Path: path, Mode: mode})
	if err != nil {
		return 0, err
	}
	defer c.forget(id)
	buf := make([]byte, MaxPayload)
	for {
		// An early error from the agent (no space, bad path) stops us.
		select {
		case f, ok := <-s.frames:
			if !ok {
				return 0, ErrClosed
			}
			if f.Type == TError {
				return 0, remoteError(f)
			}
			return 0, fmt.Errorf("protocol: unexpected %s frame during put", f.Type)
		default:
		}
		n, rerr := r.Read(buf)
		if n > 0 {
			if err := c.write(Frame{Type: TData, Stream: id, Payload: buf[:n]}); err != nil {
				return 0, err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			// Tell the agent to drop the temporary file: an error frame
			// from the host is an abort.
			c.write(Frame{Type: TError, Stream: id, Payload: Encode(ErrorMessage{Code: "aborted", Message: "upload aborted"})})
			return 0, rerr
		}
		if err := ctx.Err(); err != nil {
			c.write(Frame{Type: TError, Stream: id, Payload: Encode(ErrorMessage{Code: "aborted", Message: "upload aborted"})})
			return 0, err
		}
	}
	if err := c.write(Frame{Type: TDataEnd, Stream: id}); err != nil {
		return 0, err
	}
	f, err := c.recv(ctx, s)
	if err != nil {
		return 0, err
	}
	switch f.Type {
	case TResponse:
		var resp Response
		if err := Decode(f.Payload, &resp); err != nil {
			return 0, err
		}
		return resp.Written, nil
	case TError:
		return 0, remoteError(f)
	}
	return 0, fmt.Errorf("protocol: unexpected %s frame ending put", f.Type)
}

// Get copies a file under the workspace to w, at most max bytes (the
// agent is asked for max; more is a protocol violation).
func (c *Client) Get(ctx context.Context, path string, w io.Writer, max int64) (int64, error) {
	id, s, err := c.open(Request{Op: OpGet, Path: path, Max: max})
	if err != nil {
		return 0, err
	}
	defer c.forget(id)
	var n int64
	for {
		f, err := c.recv(ctx, s)
		if err != nil {
			return n, err
		}
		switch f.Type {
		case TData:
			n += int64(len(f.Payload))
			if n > max {
				return n, fmt.Errorf("%w: file larger than the %d bytes asked for", errViolation, max)
			}
			if _, err := w.Write(f.Payload); err != nil {
				return n, err
			}
		case TDataEnd:
			return n, nil
		case TError:
			return n, remoteError(f)
		default:
			return n, fmt.Errorf("%w: unexpected %s frame during get", errViolation, f.Type)
		}
	}
}

var errViolation = errors.New("protocol violation")

// The Client is the domain's Agent; its Process the domain's Process.
var (
	_ airlock.Agent   = (*Client)(nil)
	_ airlock.Process = (*Process)(nil)
)
