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
}

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
	lines := strings.Split(string(b[:end]), "\r\n")
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
	for _, line := range lines[1:] {
		if line == "" || line[0] == ' ' || line[0] == '\t' {
			return h, errBadHTTP // no obsolete line folding
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || !validToken(name) {
			return h, errBadHTTP
		}
		if strings.EqualFold(name, "Host") {
			if found {
				return h, errManyHosts
			}
			found = true
			host = strings.Trim(value, " \t")
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
	return HTTPHead{Method: method, Host: name, Port: port, Path: target}, nil
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
