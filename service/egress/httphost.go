package egress

import (
	"bytes"
	"errors"
	"net/netip"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock"
)

// maxHTTPHead bounds the request line and headers the proxy reads before
// deciding.
const maxHTTPHead = 16 << 10

// Reasons an HTTP request head is refused.
var (
	errNotHTTP         = errors.New("not an HTTP/1 request")
	errBadHTTP         = errors.New("malformed HTTP request head")
	errHeadTooLarge    = errors.New("HTTP request head too large")
	errNoHost          = errors.New("no Host header")
	errManyHosts       = errors.New("more than one Host header")
	errBadHost         = errors.New("Host is not a valid host name")
	errHostAddress     = errors.New("Host is an address, not a name")
	errHostMismatch    = errors.New("the request target names another host than the Host header")
	errConnectMethod   = errors.New("CONNECT: the proxy is transparent, not an HTTP proxy")
	errHTTP2PriorKnown = errors.New("HTTP/2 without TLS is not supported")
	errBodyFraming     = errors.New("ambiguous or unsupported body framing (Content-Length, Transfer-Encoding)")
)

var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT", "PRI"}

// looksLikeHTTP reports whether b could be the start of an HTTP request
// line (a known method and a space, or a prefix of one).
func looksLikeHTTP(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, m := range httpMethods {
		full := m + " "
		n := min(len(b), len(full))
		if string(b[:n]) == full[:n] {
			return true
		}
	}
	return false
}

// HTTPHead is what the proxy needs of a request head.
type HTTPHead struct {
	Method string
	Host   string // normalised name
	Port   int    // from the Host header; 0 when it names none
	Path   string // the request target

	// HeadLen is the length of the head, through the blank line that
	// ends it; the body (if any) follows.
	HeadLen int
	// Chunked is set when the body is sent in chunks; else
	// ContentLength is its length (0: no body).
	Chunked       bool
	ContentLength int64
	// Upgrade is the Upgrade header's value, lower case ("" if none).
	Upgrade string
}

// WebSocket reports whether the request asks to switch to WebSocket and
// to nothing else.
func (h HTTPHead) WebSocket() bool { return h.Upgrade == "websocket" }

// ParseHTTPHead parses an HTTP/1 request head at the start of b. It
// returns errNeedMore until the blank line that ends the head; any other
// error is final.
func ParseHTTPHead(b []byte) (HTTPHead, error) {
	var h HTTPHead
	if !looksLikeHTTP(b) {
		return h, errNotHTTP
	}
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) > maxHTTPHead {
			return h, errHeadTooLarge
		}
		return h, errNeedMore
	}
	if end+4 > maxHTTPHead {
		return h, errHeadTooLarge
	}
	head := string(b[:end])
	// A CR or LF that is not part of a CRLF, or a NUL, is where lenient
	// servers and this parser could disagree on where a header (or the
	// head) ends: refused.
	if strings.ContainsAny(strings.ReplaceAll(head, "\r\n", ""), "\r\n\x00") {
		return h, errBadHTTP
	}
	lines := strings.Split(head, "\r\n")
	parts := strings.Split(lines[0], " ")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return h, errBadHTTP
	}
	method, target, version := parts[0], parts[1], parts[2]
	if method == "PRI" || version == "HTTP/2.0" {
		return h, errHTTP2PriorKnown
	}
	if version != "HTTP/1.1" && version != "HTTP/1.0" {
		return h, errBadHTTP
	}
	if method == "CONNECT" {
		return h, errConnectMethod
	}
	if !validToken(method) || !validTarget(target) {
		return h, errBadHTTP
	}
	host, found := "", false
	var te, cl, upgrade []string
	for _, line := range lines[1:] {
		if line == "" || line[0] == ' ' || line[0] == '\t' {
			return h, errBadHTTP // no obsolete line folding
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || !validToken(name) {
			return h, errBadHTTP
		}
		value = strings.Trim(value, " \t")
		switch {
		case strings.EqualFold(name, "Host"):
			if found {
				return h, errManyHosts
			}
			found = true
			host = value
		case strings.EqualFold(name, "Transfer-Encoding"):
			te = append(te, value)
		case strings.EqualFold(name, "Content-Length"):
			cl = append(cl, value)
		case strings.EqualFold(name, "Upgrade"):
			upgrade = append(upgrade, value)
		}
	}
	if !found || host == "" {
		return h, errNoHost
	}
	name, port, err := splitHost(host)
	if err != nil {
		return h, err
	}
	if rest, ok := strings.CutPrefix(target, "http://"); ok {
		authority, _, _ := strings.Cut(rest, "/")
		tname, tport, err := splitHost(authority)
		if err != nil || tname != name || tport != port {
			return h, errHostMismatch
		}
	} else if !strings.HasPrefix(target, "/") && target != "*" {
		return h, errBadHTTP
	}
	h = HTTPHead{Method: method, Host: name, Port: port, Path: target, HeadLen: end + 4}
	if h.Chunked, h.ContentLength, err = bodyFraming(version, te, cl); err != nil {
		return HTTPHead{}, err
	}
	h.Upgrade = strings.ToLower(strings.Join(upgrade, ","))
	return h, nil
}

// bodyFraming reads how a request's body is delimited from its
// Transfer-Encoding and Content-Length values. Only what every server
// reads the same way passes (RFC 9112, section 6): chunked as the last
// coding and no Content-Length, or one Content-Length (repeated values
// must agree), or neither (no body). Anything else could make the proxy
// and the upstream see different requests in one stream, so it is
// refused.
func bodyFraming(version string, te, cl []string) (chunked bool, length int64, err error) {
	if len(te) > 0 {
		if len(cl) > 0 || version == "HTTP/1.0" {
			return false, 0, errBodyFraming
		}
		codings := strings.Split(strings.Join(te, ","), ",")
		for i, c := range codings {
			c = strings.ToLower(strings.Trim(c, " \t"))
			if !validToken(c) || (c == "chunked") != (i == len(codings)-1) {
				return false, 0, errBodyFraming
			}
		}
		return true, 0, nil
	}
	length = -1
	if len(cl) == 0 {
		return false, 0, nil
	}
	for _, v := range strings.Split(strings.Join(cl, ","), ",") {
		v = strings.Trim(v, " \t")
		if v == "" || len(v) > 18 || strings.Trim(v, "0123456789") != "" {
			return false, 0, errBodyFraming
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		if length >= 0 && n != length {
			return false, 0, errBodyFraming
		}
		length = n
	}
	return false, length, nil
}

// splitHost splits a Host value into a normalised name and a port.
func splitHost(s string) (string, int, error) {
	if strings.HasPrefix(s, "[") {
		return "", 0, errHostAddress
	}
	name, port := s, 0
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		p, err := strconv.Atoi(s[i+1:])
		if err != nil || p < 1 || p > 65535 || s[i+1:] != strconv.Itoa(p) {
			return "", 0, errBadHost
		}
		name, port = s[:i], p
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return "", 0, errHostAddress
	}
	n, ok := airlock.NormalizeHost(name)
	if !ok {
		if allDigitsAndDots(name) {
			return "", 0, errHostAddress
		}
		return "", 0, errBadHost
	}
	return n, port, nil
}

func allDigitsAndDots(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			return false
		}
	}
	return s != ""
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?={}", c) >= 0 {
			return false
		}
	}
	return true
}

func validTarget(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return false
		}
	}
	return true
}
