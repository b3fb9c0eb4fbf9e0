package egress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// A plain-HTTP connection is relayed request by request: the proxy reads
// each request's head, checks its Host against the allow list as it did
// the first one's, forwards the head, then forwards exactly the body the
// head announces (spliced in the kernel, as the rest of the proxy does),
// and reads the next head. So a kept-alive connection to an allowed name
// cannot carry a later request for another name to the same server (a
// CDN or a virtual host would route it there). A refused request gets a
// 403 (400 when it is malformed) after the answers to the requests before
// it, and the connection is closed.
//
// Answers are relayed as they come, unread, with one exception: when the
// first request asks to switch to WebSocket, the proxy reads the heads of
// the answers to it; after a 101 the connection carries WebSocket frames
// and is relayed both ways without further reading. Any other protocol
// switch is not followed (a request on a switched connection does not
// parse and is refused).

// Bounds of the parts of a chunked body the proxy reads.
const (
	maxChunkLine   = 4 << 10
	maxChunkDigits = 15
)

// httpDrainTimeout bounds how long a refused request waits for the
// upstream to finish answering the requests before it.
const httpDrainTimeout = 5 * time.Second

// httpLinger bounds how long the proxy reads (and drops) what the client
// still sends after its refusal, so that closing does not reset the
// connection before the client has read the answer.
const httpLinger = time.Second

// refusal is a later request the proxy refused.
type refusal struct {
	head   HTTPHead
	hostHd string // the Host as the request named it (name and port)
	status int
	reason string
	detail string
}

// httpRelay relays one plain-HTTP connection.
type httpRelay struct {
	pc   *proxyConn
	buf  []byte // read from the client, not yet forwarded
	rbuf []byte // for reads from the client

	mu        sync.Mutex
	refusing  bool // the up side is answering a refused request
	clientEOF bool // the down side has closed the client's read side

	downDone chan struct{}
	downErr  error
	verdict  chan bool // the answer to a first WebSocket request: switched or not
}

// relayHTTP relays a plain-HTTP connection whose first request (at the
// start of head) was admitted. It returns the request it refused, if any.
func (pc *proxyConn) relayHTTP(head []byte, first HTTPHead) *refusal {
	defer pc.client.Close()
	defer pc.upstream.Close()
	h := &httpRelay{pc: pc, buf: head, downDone: make(chan struct{}), verdict: make(chan bool, 1)}
	go func() {
		defer close(h.downDone)
		h.downErr = h.down(first.WebSocket())
		h.mu.Lock()
		if !h.refusing {
			pc.client.CloseWrite()
			h.clientEOF = true
		}
		h.mu.Unlock()
	}()
	ref, err := h.up(first.WebSocket())
	switch {
	case err != nil:
		// One side failed: end the other too.
		pc.client.Close()
		pc.upstream.Close()
		<-h.downDone
	case ref != nil:
		h.refuse(ref)
	default:
		pc.upstream.CloseWrite()
		<-h.downDone
		if h.downErr != nil {
			pc.client.Close()
		}
	}
	return ref
}

// up forwards the client's requests, checking each, until the client is
// done (nil, nil), a request is refused, or the connection fails.
func (h *httpRelay) up(webSocket bool) (*refusal, error) {
	for first := true; ; first = false {
		hd, err := h.readHead()
		if err == io.EOF {
			return nil, nil
		}
		var pe parseError
		if errors.As(err, &pe) {
			return &refusal{head: hd, status: http.StatusBadRequest, reason: httpReason(pe.err), detail: "a later request on the connection: " + pe.err.Error()}, nil
		}
		if err != nil {
			return nil, err
		}
		if ref := h.check(hd); ref != nil {
			return ref, nil
		}
		if err := h.forward(hd.HeadLen); err != nil {
			return nil, err
		}
		if hd.Chunked {
			err = h.forwardChunked()
		} else {
			err = h.forwardN(hd.ContentLength)
		}
		if err != nil {
			if errors.As(err, &pe) {
				// The body does not frame: nothing after it can be read
				// as a request, and the upstream has part of it.
				h.pc.cut("bad-http-request")
			}
			return nil, err
		}
		if first && webSocket {
			var switched bool
			select {
			case switched = <-h.verdict:
			case <-h.downDone:
				return nil, nil
			}
			if switched {
				if err := h.forward(len(h.buf)); err != nil {
					return nil, err
				}
				return nil, h.pc.pump(h.pc.upstream, h.pc.client, &h.pc.up)
			}
		}
	}
}

// check applies to a later request what handle applied to the first.
func (h *httpRelay) check(hd HTTPHead) *refusal {
	pc := h.pc
	ref := &refusal{head: hd, hostHd: hd.Host, status: http.StatusForbidden}
	if hd.Port != 0 {
		ref.hostHd += ":" + strconv.Itoa(hd.Port)
		if hd.Port != pc.port {
			ref.reason, ref.detail = "host-port-mismatch", fmt.Sprintf("Host names port %d, the connection is to port %d", hd.Port, pc.port)
			return ref
		}
	}
	if hd.Host == airlock.BrokerHost {
		ref.reason, ref.detail = "not-in-allow-list", fmt.Sprintf("a later request on a connection to %s named the broker, which is reached on a connection of its own", pc.name)
		return ref
	}
	if _, ok := pc.a.policy.Load().Admit(hd.Host, pc.port, ProtoHTTP); !ok {
		ref.reason, ref.detail = "not-in-allow-list", fmt.Sprintf("%s port %d is not in the allow list (a later request on a connection to %s)", hd.Host, pc.port, pc.name)
		return ref
	}
	return nil
}

// parseError is a request the proxy cannot read as HTTP/1.
type parseError struct{ err error }

func (e parseError) Error() string { return e.err.Error() }

// fill reads once more from the client.
func (h *httpRelay) fill() error {
	if h.rbuf == nil {
		h.rbuf = make([]byte, 16<<10)
	}
	n, err := h.pc.client.Read(h.rbuf)
	h.buf = append(h.buf, h.rbuf[:n]...)
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// readHead reads the next request head into buf. Empty lines before it
// are dropped (RFC 9112, section 2.2). io.EOF: the client is done.
func (h *httpRelay) readHead() (HTTPHead, error) {
	for {
		for bytes.HasPrefix(h.buf, []byte("\r\n")) {
			h.buf = h.buf[2:]
		}
		if len(h.buf) > 0 && !bytes.Equal(h.buf, []byte("\r")) {
			hd, err := ParseHTTPHead(h.buf)
			if err == nil {
				return hd, nil
			}
			if err != errNeedMore {
				return hd, parseError{err}
			}
		}
		if err := h.fill(); err != nil {
			if err == io.EOF && len(h.buf) > 0 {
				return HTTPHead{}, parseError{errBadHTTP}
			}
			return HTTPHead{}, err
		}
	}
}

// forward sends the first n bytes of buf upstream.
func (h *httpRelay) forward(n int) error {
	if n == 0 {
		return nil
	}
	w, err := h.pc.upstream.Write(h.buf[:n])
	h.buf = h.buf[n:]
	if err := h.count(int64(w)); err != nil {
		return err
	}
	return err
}

func (h *httpRelay) count(n int64) error {
	h.pc.up.Add(n)
	if !h.pc.a.charge(n) {
		h.pc.cut("quota-exceeded")
		return errQuota
	}
	return nil
}

// forwardN sends the next n bytes of the client's stream upstream: what
// buf holds, then straight from the socket.
func (h *httpRelay) forwardN(n int64) error {
	k := min(n, int64(len(h.buf)))
	if err := h.forward(int(k)); err != nil {
		return err
	}
	n -= k
	for n > 0 {
		w, err := io.CopyN(h.pc.upstream, h.pc.client, min(n, h.pc.a.chunk()))
		n -= w
		if cerr := h.count(w); cerr != nil {
			return cerr
		}
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// line returns the length of the CRLF-ended line at the start of buf,
// reading more as needed, up to max bytes.
func (h *httpRelay) line(max int) (int, error) {
	for {
		if i := bytes.IndexByte(h.buf, '\n'); i >= 0 {
			if i == 0 || h.buf[i-1] != '\r' || i+1 > max {
				return 0, parseError{errBodyFraming}
			}
			return i + 1, nil
		}
		if len(h.buf) > max {
			return 0, parseError{errBodyFraming}
		}
		if err := h.fill(); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
}

// forwardChunked sends a chunked body upstream, reading its chunk sizes
// and trailer strictly.
func (h *httpRelay) forwardChunked() error {
	for {
		n, err := h.line(maxChunkLine)
		if err != nil {
			return err
		}
		size, err := chunkSize(h.buf[:n-2])
		if err != nil {
			return err
		}
		if err := h.forward(n); err != nil {
			return err
		}
		if size == 0 {
			return h.forwardTrailer()
		}
		if err := h.forwardN(size); err != nil {
			return err
		}
		for len(h.buf) < 2 {
			if err := h.fill(); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
		}
		if !bytes.HasPrefix(h.buf, []byte("\r\n")) {
			return parseError{errBodyFraming}
		}
		if err := h.forward(2); err != nil {
			return err
		}
	}
}

// chunkSize parses a chunk-size line (without its CRLF): hex digits, then
// optional extensions of visible characters.
func chunkSize(line []byte) (int64, error) {
	digits, ext, _ := bytes.Cut(line, []byte(";"))
	if len(digits) == 0 || len(digits) > maxChunkDigits {
		return 0, parseError{errBodyFraming}
	}
	var n int64
	for _, c := range digits {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, parseError{errBodyFraming}
		}
		n = n<<4 | int64(d)
	}
	for _, c := range ext {
		if c < ' ' && c != '\t' || c == 0x7f {
			return 0, parseError{errBodyFraming}
		}
	}
	return n, nil
}

// forwardTrailer sends the trailer section after the last chunk: header
// lines, then an empty line.
func (h *httpRelay) forwardTrailer() error {
	total := 0
	for {
		n, err := h.line(maxHTTPHead - total)
		if err != nil {
			return err
		}
		total += n
		field := string(h.buf[:n-2])
		if n > 2 {
			name, _, ok := strings.Cut(field, ":")
			if !ok || !validToken(name) || strings.ContainsAny(field, "\r\x00") {
				return parseError{errBodyFraming}
			}
		}
		if err := h.forward(n); err != nil {
			return err
		}
		if n == 2 {
			return nil
		}
	}
}

// down relays the upstream's answers to the client. When the first
// request asked for WebSocket it first reads the heads of the answers to
// it and tells up whether the upstream switched.
func (h *httpRelay) down(webSocket bool) error {
	pc := h.pc
	if webSocket {
		switched, rest, err := h.switchVerdict()
		h.verdict <- switched
		if err == nil && len(rest) > 0 {
			err = h.toClient(rest)
		}
		if err != nil {
			return err
		}
	}
	return pc.pump(pc.client, pc.upstream, &pc.down)
}

// switchVerdict relays the answer heads to a WebSocket request: interim
// (1xx) ones, then a 101 (switched) or a final one (not switched; its
// body and what follows are relayed unread). rest is what was read past
// the last head relayed.
func (h *httpRelay) switchVerdict() (switched bool, rest []byte, err error) {
	var buf []byte
	var tmp [4 << 10]byte
	for {
		if end := bytes.Index(buf, []byte("\r\n\r\n")); end >= 0 {
			code := statusCode(buf[:end])
			if err := h.toClient(buf[:end+4]); err != nil {
				return false, nil, err
			}
			buf = buf[end+4:]
			switch {
			case code == http.StatusSwitchingProtocols:
				return true, buf, nil
			case code >= 100 && code < 200:
				continue
			default:
				return false, buf, nil
			}
		}
		if len(buf) > maxHTTPHead {
			return false, buf, nil // not an answer the proxy reads: relayed, not switched
		}
		n, rerr := h.pc.upstream.Read(tmp[:])
		buf = append(buf, tmp[:n]...)
		if rerr != nil && n == 0 {
			if len(buf) > 0 {
				h.toClient(buf)
			}
			if rerr == io.EOF {
				rerr = nil
			}
			return false, nil, rerr
		}
	}
}

// statusCode reads the status code of an HTTP/1 answer head; 0 if it is
// not one.
func statusCode(head []byte) int {
	line, _, _ := bytes.Cut(head, []byte("\r\n"))
	parts := strings.SplitN(string(line), " ", 3)
	if len(parts) < 2 || !strings.HasPrefix(parts[0], "HTTP/1.") || len(parts[1]) != 3 {
		return 0
	}
	code, err := strconv.Atoi(parts[1])
	if err != nil {
		return 0
	}
	return code
}

// toClient writes b to the client, counting and charging it.
func (h *httpRelay) toClient(b []byte) error {
	n, err := h.pc.client.Write(b)
	h.pc.down.Add(int64(n))
	if !h.pc.a.charge(int64(n)) {
		h.pc.cut("quota-exceeded")
		return errQuota
	}
	return err
}

// refuse answers a refused request: the upstream is told the client is
// done and given a while to finish answering the requests before it
// (relayed as usual), then the client gets the refusal and the
// connection is closed.
func (h *httpRelay) refuse(ref *refusal) {
	pc := h.pc
	h.mu.Lock()
	h.refusing = true
	answered := h.clientEOF
	h.mu.Unlock()
	pc.upstream.CloseWrite()
	select {
	case <-h.downDone:
	case <-time.After(httpDrainTimeout):
		pc.upstream.Close()
		<-h.downDone
	}
	if !pc.markCut("request-denied") || answered || h.downErr != nil {
		// Cut for another reason meanwhile, or the client can no
		// longer be answered.
		return
	}
	body := fmt.Sprintf("airlock egress: request refused (%s): %s\n", ref.reason, ref.detail)
	resp := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		ref.status, http.StatusText(ref.status), len(body), body)
	pc.client.SetWriteDeadline(time.Now().Add(httpLinger))
	if err := h.toClient([]byte(resp)); err != nil {
		return
	}
	pc.client.CloseWrite()
	// Drop what the client still sends (the rest of the refused request)
	// until it closes, so that the close is not a reset that could
	// destroy the answer before the client read it.
	pc.client.SetReadDeadline(time.Now().Add(httpLinger))
	io.Copy(io.Discard, io.LimitReader(pc.client, 1<<20))
}
