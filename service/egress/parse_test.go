package egress_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/egress"
)

// clientHello captures the first flight of a real TLS client.
func clientHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	go func() {
		tc := tls.Client(c, cfg)
		tc.SetDeadline(time.Now().Add(2 * time.Second))
		tc.Handshake()
	}()
	var buf bytes.Buffer
	b := make([]byte, 4096)
	s.SetReadDeadline(time.Now().Add(2 * time.Second))
	for {
		n, err := s.Read(b)
		buf.Write(b[:n])
		if _, perr := egress.ParseClientHello(buf.Bytes()); perr == nil || err != nil {
			return buf.Bytes()
		}
	}
}

func TestParseClientHello(t *testing.T) {
	hello := clientHello(t, &tls.Config{ServerName: "API.Example.test"})
	name, err := egress.ParseClientHello(hello)
	if err != nil || name != "api.example.test" {
		t.Fatalf("got %q, %v; want api.example.test", name, err)
	}
	// Every strict prefix needs more.
	for i := 0; i < len(hello); i++ {
		if _, err := egress.ParseClientHello(hello[:i]); err == nil || err.Error() != "need more bytes" {
			t.Fatalf("prefix %d: %v, want need more", i, err)
		}
	}
	// The same hello split over two records.
	body := hello[5:]
	split := len(body) / 2
	var two []byte
	two = append(two, 0x16, 0x03, 0x01, byte(split>>8), byte(split))
	two = append(two, body[:split]...)
	rest := len(body) - split
	two = append(two, 0x16, 0x03, 0x01, byte(rest>>8), byte(rest))
	two = append(two, body[split:]...)
	if name, err := egress.ParseClientHello(two); err != nil || name != "api.example.test" {
		t.Errorf("split records: %q, %v", name, err)
	}
	// No server name (a client connecting to an address sends none).
	noSNI := clientHello(t, &tls.Config{InsecureSkipVerify: true})
	if name, err := egress.ParseClientHello(noSNI); err != nil || name != "" {
		t.Errorf("no SNI: %q, %v", name, err)
	}
	bad := map[string][]byte{
		"not a handshake": {0x17, 0x03, 0x03, 0x00, 0x01, 0x00},
		"empty record":    {0x16, 0x03, 0x01, 0x00, 0x00},
		"server hello":    {0x16, 0x03, 0x03, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00},
		"huge record":     {0x16, 0x03, 0x01, 0xff, 0xff},
		"truncated body":  {0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x03},
		"http":            []byte("GET / HTTP/1.1\r\n"),
	}
	for name, b := range bad {
		if _, err := egress.ParseClientHello(b); err == nil || err.Error() == "need more bytes" {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
}

func TestParseHTTPHead(t *testing.T) {
	tests := []struct {
		in   string
		host string
		port int
		err  string
	}{
		{"GET /x HTTP/1.1\r\nHost: API.test\r\nAccept: */*\r\n\r\n", "api.test", 0, ""},
		{"POST / HTTP/1.1\r\nhost: api.test:8080\r\n\r\nbody", "api.test", 8080, ""},
		{"GET http://api.test/x HTTP/1.1\r\nHost: api.test\r\n\r\n", "api.test", 0, ""},
		{"GET http://evil.test/x HTTP/1.1\r\nHost: api.test\r\n\r\n", "", 0, "another host"},
		{"GET / HTTP/1.1\r\nHost: 198.18.0.10\r\n\r\n", "", 0, "address"},
		{"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", "", 0, "address"},
		{"GET / HTTP/1.1\r\nHost: 10.1\r\n\r\n", "", 0, "address"},
		{"GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", "", 0, "more than one"},
		{"GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", "", 0, "no Host"},
		{"GET / HTTP/1.1\r\nHost: a.test\r\n folded\r\n\r\n", "", 0, "malformed"},
		{"CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n", "", 0, "CONNECT"},
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "", 0, "HTTP/2"},
		{"GET / HTTP/1.1\r\nHost: a.test:99999\r\n\r\n", "", 0, "valid host"},
		{"GET / HTTP/1.1\r\nHost: bad_host!\r\n\r\n", "", 0, "valid host"},
		{"GET / HTTP/1.1\r\nHost: a.test", "", 0, "need more"},
		{"SSH-2.0-OpenSSH_9.6\r\n", "", 0, "not an HTTP"},
	}
	for _, tt := range tests {
		h, err := egress.ParseHTTPHead([]byte(tt.in))
		switch {
		case tt.err == "" && (err != nil || h.Host != tt.host || h.Port != tt.port):
			t.Errorf("%q: %+v, %v; want %s:%d", tt.in, h, err, tt.host, tt.port)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: %v, want an error with %q", tt.in, err, tt.err)
		}
	}
	long := "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", 20<<10)
	if _, err := egress.ParseHTTPHead([]byte(long)); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("oversized head: %v", err)
	}
}

// The body framing of a request head: what the proxy needs to find the
// next request on a kept-alive connection, and refusals of anything two
// servers could read differently.
func TestParseHTTPHeadFraming(t *testing.T) {
	tests := []struct {
		headers string
		chunked bool
		length  int64
		upgrade string
		err     bool
	}{
		{headers: ""},
		{headers: "Content-Length: 12\r\n", length: 12},
		{headers: "Content-Length: 12\r\ncontent-length: 12\r\n", length: 12},
		{headers: "Content-Length: 12, 12\r\n", length: 12},
		{headers: "Content-Length: 007\r\n", length: 7},
		{headers: "Transfer-Encoding: chunked\r\n", chunked: true},
		{headers: "Transfer-Encoding: gzip, Chunked\r\n", chunked: true},
		{headers: "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", chunked: true},
		{headers: "Upgrade: WebSocket\r\nConnection: Upgrade\r\n", upgrade: "websocket"},
		{headers: "Upgrade: h2c, websocket\r\n", upgrade: "h2c, websocket"},
		{headers: "Content-Length: 12\r\nTransfer-Encoding: chunked\r\n", err: true},
		{headers: "Content-Length: 12\r\nContent-Length: 13\r\n", err: true},
		{headers: "Content-Length: -1\r\n", err: true},
		{headers: "Content-Length: +1\r\n", err: true},
		{headers: "Content-Length: 0x10\r\n", err: true},
		{headers: "Content-Length: \r\n", err: true},
		{headers: "Content-Length: 99999999999999999999\r\n", err: true},
		{headers: "Transfer-Encoding: chunked, gzip\r\n", err: true},
		{headers: "Transfer-Encoding: chunked, chunked\r\n", err: true},
		{headers: "Transfer-Encoding: identity\r\n", err: true},
		{headers: "Transfer-Encoding: chunked\n", err: true},
		{headers: "X: a\nTransfer-Encoding: chunked\r\n", err: true},
		{headers: "X: a\rb\r\n", err: true},
		{headers: "X: a\x00b\r\n", err: true},
		{headers: "Transfer-Encoding : chunked\r\n", err: true},
	}
	for _, tt := range tests {
		in := "POST /x HTTP/1.1\r\nHost: api.test\r\n" + tt.headers + "\r\nbody"
		h, err := egress.ParseHTTPHead([]byte(in))
		switch {
		case tt.err && err == nil:
			t.Errorf("%q: parsed %+v, want an error", tt.headers, h)
		case !tt.err && err != nil:
			t.Errorf("%q: %v", tt.headers, err)
		case !tt.err && (h.Chunked != tt.chunked || h.ContentLength != tt.length || h.Upgrade != tt.upgrade || h.HeadLen != len(in)-4):
			t.Errorf("%q: %+v, want chunked %v, length %d, upgrade %q, head length %d", tt.headers, h, tt.chunked, tt.length, tt.upgrade, len(in)-4)
		}
	}
	if _, err := egress.ParseHTTPHead([]byte("GET / HTTP/1.0\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n")); err == nil {
		t.Error("chunked in HTTP/1.0 parsed")
	}
}

func TestTunnelFlags(t *testing.T) {
	tests := []struct {
		name  string
		flags []string
	}{
		{"pypi.org", nil},
		{"files.pythonhosted.org", nil},
		{"my-load-balancer-1234567890.us-west-2.elb.amazonaws.com", nil},
		{"c2VjcmV0LWRhdGEtZnJvbS10aGUtd29ya3NwYWNlLWNodW5rLTAwMQ.exfil.test", []string{egress.FlagLongLabel, egress.FlagHighEntropy}},
		{"q8zk3m1x9v7b2n4c.exfil.test", []string{egress.FlagHighEntropy}},
		{"a.b.c.d.e.f.g.h.i.j.k.test", []string{egress.FlagManyLabels}},
	}
	for _, tt := range tests {
		got := egress.TunnelFlags(tt.name)
		if strings.Join(got, ",") != strings.Join(tt.flags, ",") {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.flags)
		}
	}
}

func TestPolicyMatching(t *testing.T) {
	p, err := egress.NewPolicy(airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"pypi.example.test:443", "*.corp.test:443", "api.test", "db.test:5432"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		port  int
		proto string
		ok    bool
	}{
		{"pypi.example.test", 443, egress.ProtoTLS, true},
		{"pypi.example.test", 80, egress.ProtoHTTP, false},
		{"a.corp.test", 443, egress.ProtoTLS, true},
		{"a.b.corp.test", 443, egress.ProtoTLS, true},
		{"corp.test", 443, egress.ProtoTLS, false},
		{"xcorp.test", 443, egress.ProtoTLS, false},
		{"api.test", 443, egress.ProtoTLS, true},
		{"api.test", 80, egress.ProtoHTTP, true},
		{"api.test", 8080, egress.ProtoHTTP, false},
		{"api.test", 443, egress.ProtoOpaque, false},
		{"db.test", 5432, egress.ProtoOpaque, true},
		{"db.test", 443, egress.ProtoTLS, false},
		{"evil.test", 443, egress.ProtoTLS, false},
	}
	for _, tt := range tests {
		if _, ok := p.Admit(tt.name, tt.port, tt.proto); ok != tt.ok {
			t.Errorf("Admit(%s, %d, %s) = %v", tt.name, tt.port, tt.proto, ok)
		}
	}
	if !p.AdmitName("x.corp.test") || p.AdmitName("corp.test") || p.AdmitName("evil.test") {
		t.Error("AdmitName")
	}
}

func TestAllowListSyntax(t *testing.T) {
	good := []string{"api.test", "API.Test.", "api.test:8443", "*.corp.test", "*.corp.test:443", "under_score.test"}
	for _, e := range good {
		if _, err := airlock.ParseAllowRule(e); err != nil {
			t.Errorf("%q: %v", e, err)
		}
	}
	bad := []string{"", "*", "*.com", "1.2.3.4", "1.2.3.4:443", "[::1]:443", "::1", "api.test:0", "api.test:65536", "api.test:+1",
		"a*.test", "*.*.test", "-a.test", "a..test", "broker.airlock.internal", "x.airlock.internal", strings.Repeat("a", 64) + ".test"}
	for _, e := range bad {
		if _, err := airlock.ParseAllowRule(e); err == nil {
			t.Errorf("%q was accepted", e)
		}
	}
	if _, err := airlock.ParseAllowList(make([]string, airlock.MaxAllowEntries+1)); err == nil {
		t.Error("an over-long list was accepted")
	}
	var ae *airlock.Error
	if _, err := airlock.ParseAllowList([]string{"1.2.3.4"}); !errors.As(err, &ae) || ae.Type != "invalid-allow-list" {
		t.Errorf("problem type: %v", err)
	}
}

func FuzzParseClientHello(f *testing.F) {
	f.Add(clientHello(f, &tls.Config{ServerName: "api.test"}))
	f.Add(clientHello(f, &tls.Config{InsecureSkipVerify: true}))
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x03})
	f.Fuzz(func(t *testing.T, b []byte) {
		name, err := egress.ParseClientHello(b)
		if err == nil && name != "" {
			if n, ok := airlock.NormalizeHost(name); !ok || n != name {
				t.Fatalf("accepted server name %q is not a normalised host name", name)
			}
		}
	})
}

func FuzzParseHTTPHead(f *testing.F) {
	f.Add([]byte("GET /x HTTP/1.1\r\nHost: api.test\r\n\r\n"))
	f.Add([]byte("GET http://api.test:81/ HTTP/1.0\r\nHost: api.test:81\r\n\r\n"))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n"))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3, 3\r\nUpgrade: websocket\r\n\r\nabc"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := egress.ParseHTTPHead(b)
		if err != nil {
			return
		}
		if n, ok := airlock.NormalizeHost(h.Host); !ok || n != h.Host {
			t.Fatalf("accepted Host %q is not a normalised host name", h.Host)
		}
		if h.Port < 0 || h.Port > 65535 {
			t.Fatalf("port %d", h.Port)
		}
		if h.HeadLen < 4 || h.HeadLen > len(b) || string(b[h.HeadLen-4:h.HeadLen]) != "\r\n\r\n" {
			t.Fatalf("head length %d of %q", h.HeadLen, b)
		}
		if h.ContentLength < 0 || h.Chunked && h.ContentLength != 0 {
			t.Fatalf("framing: chunked %v, length %d", h.Chunked, h.ContentLength)
		}
	})
}

func FuzzTunnelFlags(f *testing.F) {
	f.Add("c2VjcmV0LWRhdGEtZnJvbS10aGUtd29ya3NwYWNlLWNodW5rLTAwMQ.exfil.test")
	f.Add("pypi.org")
	f.Add("\\000.\\255.")
	f.Fuzz(func(t *testing.T, name string) {
		egress.TunnelFlags(name)
		if n, ok := airlock.NormalizeHost(name); ok {
			if n2, ok2 := airlock.NormalizeHost(n); !ok2 || n2 != n {
				t.Fatalf("NormalizeHost is not idempotent on %q", name)
			}
		}
	})
}

func FuzzAllowRule(f *testing.F) {
	for _, s := range []string{"api.test", "*.corp.test:443", "1.2.3.4", "a:b:c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := airlock.ParseAllowRule(s)
		if err != nil {
			return
		}
		r2, err := airlock.ParseAllowRule(r.String())
		if err != nil || r2 != r {
			t.Fatalf("%q -> %q does not round-trip: %v", s, r.String(), err)
		}
	})
}
