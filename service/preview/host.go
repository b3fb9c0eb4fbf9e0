package preview

import (
	"errors"
	"strings"
)

// ErrBadHost is a Host under the preview domain that names no port of
// a session exactly.
var ErrBadHost = errors.New("preview: not a preview host")

// ParseHost reads a Host header of the form
// {port}-{session_id}.{domain}, optionally with :{listen port} after
// it, and nothing else: the port a number 1-65535 without leading zeros
// or sign, the session ID 32 lower-case hex digits, the domain exactly
// domain (case-insensitively, one trailing dot allowed). under says
// whether host is under domain at all (a Host under it that does not
// parse is refused, never served as the API; so is any Host that
// mentions the domain at all).
func ParseHost(host, domain string) (port int, sessionID string, under bool, err error) {
	if domain == "" || len(host) > 300 {
		return 0, "", false, ErrBadHost
	}
	h := strings.ToLower(host)
	// Split off a listen port: digits after the last colon (no IPv6
	// literal is under a DNS domain).
	listen, hasListen := "", false
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h, listen, hasListen = h[:i], h[i+1:], true
	}
	h = strings.TrimSuffix(h, ".")
	// Anything that names the domain and is not exactly a preview host
	// is refused, never taken for the API.
	mentions := strings.Contains(strings.ToLower(host), domain)
	if h == domain {
		return 0, "", false, ErrBadHost // the bare domain may be the API's own name
	}
	label, ok := strings.CutSuffix(h, "."+domain)
	if !ok {
		return 0, "", mentions, ErrBadHost
	}
	if hasListen && (listen == "" || len(listen) > 5 || !allDigits(listen)) {
		return 0, "", true, ErrBadHost
	}
	p, sid, ok := strings.Cut(label, "-")
	if !ok {
		return 0, "", true, ErrBadHost
	}
	port, ok = ParsePort(p)
	if !ok || !ValidSessionID(sid) {
		return 0, "", true, ErrBadHost
	}
	return port, sid, true, nil
}

// ParsePort reads a port number: 1 to 65535 in decimal, no sign, no
// leading zero, nothing else.
func ParsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 || s[0] == '0' || !allDigits(s) {
		return 0, false
	}
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n, n >= 1 && n <= 65535
}

// ValidSessionID reports whether s has the syntax of a session ID
// (airlock.NewID): 32 lower-case hex digits.
func ValidSessionID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
