package egress_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// recorder is an upstream that answers every request with what it saw
// and remembers it; /ws switches to an echo of raw bytes.
type recorder struct {
	mu   sync.Mutex
	seen []string // "host path body"
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	line := fmt.Sprintf("%s %s %q", r.Host, r.URL.Path, body)
	rc.mu.Lock()
	rc.seen = append(rc.seen, line)
	rc.mu.Unlock()
	if r.URL.Path == "/ws" && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		io.Copy(c, brw) // echo until the client closes
		return
	}
	io.WriteString(w, line)
}

func (rc *recorder) all() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.seen...)
}

// conn is a raw client connection from the sandbox.
type conn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func (s *sandbox) rawHTTP(t *testing.T, addr string) *conn {
	t.Helper()
	c, err := s.dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(15 * time.Second))
	return &conn{t: t, c: c, br: bufio.NewReader(c)}
}

func (c *conn) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.c, s); err != nil {
		c.t.Fatal(err)
	}
}

// expect reads one answer and checks its status and that its body
// contains want.
func (c *conn) expect(status int, want string) {
	c.t.Helper()
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.t.Fatalf("want %d %q: %v", status, want, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != status || !strings.Contains(string(b), want) {
		c.t.Fatalf("got %d %q (%v), want %d with %q", resp.StatusCode, b, err, status, want)
	}
}

// expectClosed checks the proxy closed the connection after its answer.
func (c *conn) expectClosed() {
	c.t.Helper()
	b, err := io.ReadAll(c.br)
	if err != nil || len(b) > 0 {
		c.t.Fatalf("want the connection closed after the answer, got %q, %v", b, err)
	}
}

// Every request on a kept-alive plain-HTTP connection is checked against
// the allow list, not only the first: a later one naming another host is
// refused with a 403, the connection closed and the refusal logged; the
// proxy reads the body framing (Content-Length, chunked) so that a body
// is never taken for a request and ambiguous framing is refused; a
// WebSocket upgrade still works.
func TestProxyChecksEveryRequestOnAConnection(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	rc := &recorder{}
	api := f.inet.ServeHTTP(rc)
	other := f.inet.ServeHTTP(http.HandlerFunc(hello))
	f.inet.SetName("api.test", api)
	f.inet.SetName("other.test", other)
	sb := f.attach([]string{"api.test"})
	seenOther := func(t *testing.T) {
		t.Helper()
		for _, s := range rc.all() {
			if host, rest, _ := strings.Cut(s, " "); host == "other.test" || strings.HasPrefix(rest, "/smuggled ") {
				t.Fatalf("the upstream got a request it must not have: %q (all: %q)", s, rc.all())
			}
		}
	}

	t.Run("a later request for an unlisted host", func(t *testing.T) {
		c := sb.rawHTTP(t, "api.test:80")
		c.send("GET /1 HTTP/1.1\r\nHost: api.test\r\n\r\n")
		c.expect(200, `api.test /1 ""`)
		c.send("GET /2 HTTP/1.1\r\nHost: api.test\r\n\r\n")
		c.expect(200, `api.test /2 ""`)
		c.send("GET /3 HTTP/1.1\r\nHost: other.test\r\n\r\n")
		c.expect(403, "not-in-allow-list")
		c.expectClosed()
		seenOther(t)
	})
	t.Run("pipelined, with bodies that look like requests", func(t *testing.T) {
		c := sb.rawHTTP(t, "api.test:80")
		fake := "GET /smuggled HTTP/1.1\r\nHost: other.test\r\n\r\n"
		c.send("POST /cl HTTP/1.1\r\nHost: api.test\r\nContent-Length: " + fmt.Sprint(len(fake)) + "\r\n\r\n" + fake +
			"POST /chunked HTTP/1.1\r\nHost: API.test:80\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n", len(fake), fake) +
			"\r\nGET /last HTTP/1.1\r\nHost: api.test\r\n\r\n" +
			"GET /other HTTP/1.1\r\nHost: other.test\r\n\r\n")
		c.expect(200, "api.test /cl "+fmt.Sprintf("%q", fake))
		c.expect(200, "/chunked "+fmt.Sprintf("%q", fake+"hello"))
		c.expect(200, `api.test /last ""`)
		c.expect(403, "other.test")
		c.expectClosed()
		seenOther(t)
	})
	for _, tt := range []struct{ name, req string }{
		{"both Content-Length and chunked", "POST /x HTTP/1.1\r\nHost: api.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"two Content-Lengths", "POST /x HTTP/1.1\r\nHost: api.test\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\nbody"},
		{"a bare LF", "GET /x HTTP/1.1\r\nHost: api.test\r\nX: a\nHost: other.test\r\n\r\n"},
		{"chunked not last", "POST /x HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"},
		{"a signed length", "POST /x HTTP/1.1\r\nHost: api.test\r\nContent-Length: +4\r\n\r\nbody"},
	} {
		t.Run("refused: "+tt.name, func(t *testing.T) {
			c := sb.rawHTTP(t, "api.test:80")
			c.send("GET /ok HTTP/1.1\r\nHost: api.test\r\n\r\n")
			c.expect(200, "/ok")
			n := len(rc.all())
			c.send(tt.req)
			c.expect(400, "bad-http-request")
			c.expectClosed()
			if got := rc.all(); len(got) != n {
				t.Fatalf("the upstream got the refused request: %q", got[n:])
			}
		})
	}
	t.Run("a malformed chunk ends the connection", func(t *testing.T) {
		c := sb.rawHTTP(t, "api.test:80")
		fake := "GET /smuggled HTTP/1.1\r\nHost: other.test\r\n\r\n"
		c.send("POST /x HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n-1\r\n" + fake)
		if resp, err := http.ReadResponse(c.br, nil); err == nil {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("got an answer %d %q", resp.StatusCode, b)
		}
		seenOther(t)
	})
	t.Run("websocket", func(t *testing.T) {
		c := sb.rawHTTP(t, "api.test:80")
		c.send("GET /ws HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %v", resp, err)
		}
		frame := "\x81\x85\x01\x02\x03\x04iglhn"
		c.send(frame)
		got := make([]byte, len(frame))
		if _, err := io.ReadFull(c.br, got); err != nil || string(got) != frame {
			t.Fatalf("echo: %q %v", got, err)
		}
	})
	t.Run("a declined upgrade is followed by requests that are checked", func(t *testing.T) {
		c := sb.rawHTTP(t, "api.test:80")
		c.send("GET /plain HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		c.expect(200, "/plain")
		c.send("GET /x HTTP/1.1\r\nHost: other.test\r\n\r\n")
		c.expect(403, "other.test")
		c.expectClosed()
		seenOther(t)
	})

	// The refusals are in the audit log, and the connections they ended
	// say why.
	var evs []*airlock.EgressEvent
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs = sb.events(airlock.EgressConnection)
		denied := find(evs, func(e *airlock.EgressEvent) bool {
			return e.Verdict == airlock.VerdictDenied && e.Reason == "not-in-allow-list" && e.Host == "other.test" && e.Name == "other.test" && e.Protocol == "http" && e.Port == 80
		})
		closed := find(evs, func(e *airlock.EgressEvent) bool {
			return e.Verdict == airlock.VerdictClosed && e.Reason == "request-denied" && e.Name == "api.test" && e.BytesDown > 0
		})
		if len(denied) == 3 && len(closed) >= 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want 3 refused requests for other.test and 8 connections ended by refusals: %s", dump(evs))
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	if got := find(evs, func(e *airlock.EgressEvent) bool {
		return e.Verdict == airlock.VerdictDenied && e.Reason == "bad-http-request"
	}); len(got) != 5 {
		t.Errorf("want 5 malformed later requests refused: %s", dump(evs))
	}
}
