package agent

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
)

// portDialTimeout bounds connecting to a port on the loopback.
const portDialTimeout = 5 * time.Second

// portHandler splices one TCP connection on the sandbox's loopback with
// a port stream (see protocol.OpPort): a reader sends what the server
// writes, a writer writes what the host sends, each within its window.
type portHandler struct {
	s      *server
	stream uint32
	conn   *net.TCPConn

	mu       sync.Mutex
	cond     *sync.Cond
	queue    [][]byte // from the host, not yet written
	queued   int      // bytes in queue plus being written, not acknowledged
	inEOF    bool     // the host sent TDataEnd
	avail    int      // bytes we may still send the host
	over     bool     // the stream is aborted
	sentEnd  bool     // we sent TDataEnd (the server closed its side)
	wroteEnd bool     // we closed the server's read side (after the host's TDataEnd)
}

// dialLoopback connects to port on this namespace's loopback only:
// 127.0.0.1, else ::1. No other address is ever dialed.
func dialLoopback(ctx context.Context, port int) (*net.TCPConn, error) {
	d := net.Dialer{Timeout: portDialTimeout}
	var first error
	for _, host := range []string{"127.0.0.1", "::1"} {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			return c.(*net.TCPConn), nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

func (s *server) port(stream uint32, port int) {
	c, err := dialLoopback(context.Background(), port)
	if err != nil {
		code := "io"
		if errors.Is(err, syscall.ECONNREFUSED) {
			code = "refused"
		}
		s.sendError(stream, code, err)
		return
	}
	h := &portHandler{s: s, stream: stream, conn: c, avail: protocol.PortWindow}
	h.cond = sync.NewCond(&h.mu)
	s.setHandler(stream, h)
	if err := s.respond(stream, protocol.Response{}); err != nil {
		s.clearHandler(stream, h)
		c.Close()
		return
	}
	go h.read()
	go h.write()
}

// frame takes the host's frames; it runs in the dispatch loop and never
// blocks.
func (h *portHandler) frame(f protocol.Frame) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.over {
		return
	}
	switch f.Type {
	case protocol.TData:
		if h.inEOF || h.queued+len(f.Payload) > protocol.PortWindow {
			h.stopLocked(true)
			return
		}
		h.queue = append(h.queue, f.Payload)
		h.queued += len(f.Payload)
	case protocol.TDataEnd:
		h.inEOF = true
	case protocol.TWindow:
		n, err := protocol.DecodeWindow(f.Payload)
		if err != nil || h.avail+n > protocol.PortWindow {
			h.stopLocked(true)
			return
		}
		h.avail += n
	default: // TError (the host closed) or anything else
		h.stopLocked(false)
		return
	}
	h.cond.Broadcast()
}

// abort ends the stream when the host connection is over.
func (h *portHandler) abort() {
	h.mu.Lock()
	h.stopLocked(false)
	h.mu.Unlock()
}

// stopLocked ends the stream (h.mu held); tell says the host is told.
func (h *portHandler) stopLocked(tell bool) {
	if h.over {
		return
	}
	h.over = true
	h.conn.Close()
	h.cond.Broadcast()
	h.s.clearHandler(h.stream, h)
	if tell {
		go h.s.sendError(h.stream, "invalid", protocol.ErrWindow)
	}
}

// done ends the stream once both directions are closed (h.mu held).
func (h *portHandler) maybeDoneLocked() {
	if h.sentEnd && h.wroteEnd && !h.over {
		h.over = true
		h.conn.Close()
		h.s.clearHandler(h.stream, h)
		h.cond.Broadcast()
	}
}

// read sends what the server writes to the host.
func (h *portHandler) read() {
	buf := make([]byte, 64<<10)
	for {
		h.mu.Lock()
		for h.avail == 0 && !h.over {
			h.cond.Wait()
		}
		if h.over {
			h.mu.Unlock()
			return
		}
		n := min(len(buf), h.avail)
		h.mu.Unlock()
		m, err := h.conn.Read(buf[:n])
		if m > 0 {
			h.mu.Lock()
			h.avail -= m
			h.mu.Unlock()
			if h.s.send(protocol.Frame{Type: protocol.TData, Stream: h.stream, Payload: buf[:m]}) != nil {
				h.abort()
				return
			}
		}
		if err != nil {
			h.mu.Lock()
			over := h.over
			h.mu.Unlock()
			if over {
				return
			}
			if errors.Is(err, io.EOF) {
				h.s.send(protocol.Frame{Type: protocol.TDataEnd, Stream: h.stream})
				h.mu.Lock()
				h.sentEnd = true
				h.maybeDoneLocked()
				h.mu.Unlock()
				return
			}
			h.s.sendError(h.stream, "io", err)
			h.abort()
			return
		}
	}
}

// write writes what the host sends to the server, acknowledging it as
// it goes.
func (h *portHandler) write() {
	for {
		h.mu.Lock()
		for len(h.queue) == 0 && !h.inEOF && !h.over {
			h.cond.Wait()
		}
		if h.over {
			h.mu.Unlock()
			return
		}
		if len(h.queue) == 0 { // the host's TDataEnd, everything written
			h.conn.CloseWrite()
			h.wroteEnd = true
			h.maybeDoneLocked()
			h.mu.Unlock()
			return
		}
		b := h.queue[0]
		h.queue = h.queue[1:]
		h.mu.Unlock()
		if _, err := h.conn.Write(b); err != nil {
			h.mu.Lock()
			over := h.over
			h.mu.Unlock()
			if !over {
				h.s.sendError(h.stream, "io", err)
				h.abort()
			}
			return
		}
		h.mu.Lock()
		h.queued -= len(b)
		h.mu.Unlock()
		if h.s.send(protocol.Frame{Type: protocol.TWindow, Stream: h.stream, Payload: protocol.WindowPayload(uint32(len(b)))}) != nil {
			h.abort()
			return
		}
	}
}
