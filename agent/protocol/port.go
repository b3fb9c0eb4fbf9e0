package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// OpPort opens a TCP connection to Request.Port on the loopback of the
// sandbox (127.0.0.1, else ::1, in the agent's own network namespace)
// and splices bytes both ways over the stream. It is how the host
// reaches a server in the sandbox (preview URLs) without the sandbox
// having any network beyond its loopback. The host names only a port:
// no address, so nothing but the sandbox's own loopback is reachable.
//
// The stream, after the request:
//
//   - The agent answers TResponse once connected, or TError (code
//     "refused": nothing listens; "invalid": a bad port) and the stream
//     is over.
//   - Both sides then send TData (bytes of the connection), TDataEnd
//     (no more bytes from this side: a half close) and TWindow.
//   - Flow control: each side may have at most PortWindow bytes of TData
//     sent and not yet acknowledged; the receiver acknowledges bytes as
//     its consumer takes them with TWindow (a 4-byte big-endian count).
//     A side that sends beyond its window is aborted. So a slow reader
//     on either end slows the writer on the other, and neither buffers
//     more than PortWindow.
//   - TError from either side ends the stream at once (the host sends
//     it when it closes the connection, the agent when the connection
//     inside fails). The stream also ends once both sides sent TDataEnd.
const OpPort Op = "port"

// PortWindow is the flow-control window of a port stream, each way.
const PortWindow = 1 << 20

// portChunk is the largest TData frame a port stream sends.
const portChunk = 64 << 10

// ValidatePort checks a port number: 1 to 65535.
func ValidatePort(p int) error {
	if p < 1 || p > 65535 {
		return fmt.Errorf("port %d out of range 1-65535", p)
	}
	return nil
}

// WindowPayload encodes a TWindow count.
func WindowPayload(n uint32) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], n)
	return b[:]
}

// DecodeWindow decodes a TWindow payload: a count of 1 to PortWindow.
func DecodeWindow(p []byte) (int, error) {
	if len(p) != 4 {
		return 0, fmt.Errorf("%w: window frame of %d bytes", errViolation, len(p))
	}
	n := binary.BigEndian.Uint32(p)
	if n == 0 || n > PortWindow {
		return 0, fmt.Errorf("%w: window of %d bytes", errViolation, n)
	}
	return int(n), nil
}

// ErrWindow is a port stream's peer sending beyond its window.
var ErrWindow = errors.New("protocol: port stream sent beyond its window")

// DialPort connects to port on the sandbox's loopback through the agent
// and returns the connection. A port nothing listens on is a
// *RemoteError with code "refused".
func (c *Client) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if err := ValidatePort(port); err != nil {
		return nil, fmt.Errorf("protocol: %w", err)
	}
	id, s, err := c.openSized(Request{Op: OpPort, Port: port}, 64)
	if err != nil {
		return nil, err
	}
	f, err := c.recv(ctx, s)
	if err != nil {
		c.write(Frame{Type: TError, Stream: id, Payload: Encode(ErrorMessage{Code: "aborted", Message: "dial abandoned"})})
		c.forget(id)
		return nil, err
	}
	switch f.Type {
	case TResponse:
	case TError:
		c.forget(id)
		return nil, remoteError(f)
	default:
		c.forget(id)
		return nil, fmt.Errorf("%w: unexpected %s frame opening a port", errViolation, f.Type)
	}
	pc := &portConn{c: c, id: id, port: port, avail: PortWindow, gone: make(chan struct{})}
	pc.cond = sync.NewCond(&pc.mu)
	go pc.pump(s)
	return pc, nil
}

// portConn is the host's end of a port stream, a net.Conn.
type portConn struct {
	c    *Client
	id   uint32
	port int

	mu       sync.Mutex
	cond     *sync.Cond
	rbuf     []byte // received, not yet read
	unacked  int    // bytes received and not yet acknowledged
	consumed int    // bytes read since the last acknowledgment
	rEOF     bool   // the agent sent TDataEnd
	avail    int    // bytes we may still send
	err      error  // the stream is over
	wClosed  bool   // we sent TDataEnd
	closed   bool
	rdl, wdl time.Time

	gone      chan struct{}
	closeOnce sync.Once
}

// pump takes the agent's frames for the stream until it ends.
func (p *portConn) pump(s *stream) {
	for {
		var f Frame
		var ok bool
		select {
		case f, ok = <-s.frames:
		case <-p.gone:
			return
		}
		if !ok {
			err := p.c.Err()
			if err == nil {
				err = ErrClosed
			}
			p.fail(err)
			return
		}
		p.mu.Lock()
		switch f.Type {
		case TData:
			if p.rEOF || p.unacked+len(f.Payload) > PortWindow {
				p.mu.Unlock()
				p.abort(ErrWindow)
				return
			}
			p.rbuf = append(p.rbuf, f.Payload...)
			p.unacked += len(f.Payload)
		case TDataEnd:
			p.rEOF = true
		case TWindow:
			n, err := DecodeWindow(f.Payload)
			if err != nil || p.avail+n > PortWindow {
				p.mu.Unlock()
				p.abort(fmt.Errorf("%w: bad window", errViolation))
				return
			}
			p.avail += n
		case TError:
			p.mu.Unlock()
			p.fail(remoteError(f))
			return
		default:
			p.mu.Unlock()
			p.abort(fmt.Errorf("%w: unexpected %s frame on a port stream", errViolation, f.Type))
			return
		}
		p.cond.Broadcast()
		p.mu.Unlock()
	}
}

// fail ends the stream with err (the agent ended it, or the connection).
func (p *portConn) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.closeOnce.Do(func() {
		close(p.gone)
		p.c.forget(p.id)
	})
}

// abort ends the stream from this side, telling the agent.
func (p *portConn) abort(err error) {
	p.closeOnce.Do(func() {
		p.c.write(Frame{Type: TError, Stream: p.id, Payload: Encode(ErrorMessage{Code: "aborted", Message: "closed"})})
		close(p.gone)
		p.c.forget(p.id)
	})
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.cond.Broadcast()
	p.mu.Unlock()
}

// errDeadline is os.ErrDeadlineExceeded, which net/http recognises.
var errDeadline = os.ErrDeadlineExceeded

func expired(t time.Time) bool { return !t.IsZero() && !time.Now().Before(t) }

func (p *portConn) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.rbuf) == 0 {
		switch {
		case p.closed:
			return 0, net.ErrClosed
		case p.rEOF:
			return 0, io.EOF
		case p.err != nil:
			return 0, p.err
		case expired(p.rdl):
			return 0, errDeadline
		}
		p.cond.Wait()
	}
	n := copy(b, p.rbuf)
	p.rbuf = p.rbuf[n:]
	if len(p.rbuf) == 0 {
		p.rbuf = nil
	}
	p.consumed += n
	p.unacked -= n
	// Acknowledge in batches: when a quarter of the window was read,
	// or everything received was.
	if p.consumed >= PortWindow/4 || (len(p.rbuf) == 0 && p.consumed > 0) {
		ack := p.consumed
		p.consumed = 0
		go p.c.write(Frame{Type: TWindow, Stream: p.id, Payload: WindowPayload(uint32(ack))})
	}
	return n, nil
}

func (p *portConn) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	written := 0
	for len(b) > 0 {
		for p.avail == 0 {
			switch {
			case p.closed:
				return written, net.ErrClosed
			case p.err != nil:
				return written, p.err
			case expired(p.wdl):
				return written, errDeadline
			}
			p.cond.Wait()
		}
		switch {
		case p.closed:
			return written, net.ErrClosed
		case p.wClosed:
			return written, errors.New("protocol: write after CloseWrite")
		case p.err != nil:
			return written, p.err
		}
		n := min(len(b), p.avail, portChunk)
		p.avail -= n
		chunk := b[:n]
		p.mu.Unlock()
		err := p.c.write(Frame{Type: TData, Stream: p.id, Payload: chunk})
		p.mu.Lock()
		if err != nil {
			return written, err
		}
		written += n
		b = b[n:]
	}
	return written, nil
}

// CloseWrite half-closes the connection: the server in the sandbox
// reads EOF.
func (p *portConn) CloseWrite() error {
	p.mu.Lock()
	if p.wClosed || p.err != nil || p.closed {
		p.mu.Unlock()
		return nil
	}
	p.wClosed = true
	p.mu.Unlock()
	return p.c.write(Frame{Type: TDataEnd, Stream: p.id})
}

func (p *portConn) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	p.abort(net.ErrClosed)
	return nil
}

// portAddr names an end of a port stream.
type portAddr string

func (a portAddr) Network() string { return "airlock-agent" }
func (a portAddr) String() string  { return string(a) }

func (p *portConn) LocalAddr() net.Addr { return portAddr("host") }
func (p *portConn) RemoteAddr() net.Addr {
	return portAddr(fmt.Sprintf("sandbox-loopback:%d", p.port))
}

func (p *portConn) SetDeadline(t time.Time) error {
	p.SetReadDeadline(t)
	return p.SetWriteDeadline(t)
}

func (p *portConn) SetReadDeadline(t time.Time) error {
	p.mu.Lock()
	p.rdl = t
	p.wake(t)
	p.mu.Unlock()
	return nil
}

func (p *portConn) SetWriteDeadline(t time.Time) error {
	p.mu.Lock()
	p.wdl = t
	p.wake(t)
	p.mu.Unlock()
	return nil
}

// wake wakes the waiters at t so they see the deadline (p.mu held).
func (p *portConn) wake(t time.Time) {
	if t.IsZero() {
		return
	}
	d := time.Until(t)
	if d <= 0 {
		p.cond.Broadcast()
		return
	}
	time.AfterFunc(d, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
}

var _ airlock.AgentPorts = (*Client)(nil)
