package egress

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"

	"github.com/airlockhq/airlock"
)

// The first bytes a sandbox sends on a connection are untrusted input: the
// parsers below read only what they bound, and any doubt is a refusal.

// errNeedMore means the bytes so far are a valid start but not enough to
// decide.
var errNeedMore = errors.New("need more bytes")

// Reasons a TLS ClientHello is refused.
var (
	errNotClientHello = errors.New("not a TLS ClientHello")
	errBadClientHello = errors.New("malformed TLS ClientHello")
	errHelloTooLarge  = errors.New("TLS ClientHello too large")
	errBadSNI         = errors.New("server name is not a valid host name")
	errSNIAddress     = errors.New("server name is an address")
)

// maxClientHello bounds the ClientHello the proxy reads before deciding
// (post-quantum key shares make them a few KiB; 64 KiB is plenty).
const maxClientHello = 64 << 10

// looksLikeTLS reports whether b starts like a TLS handshake record.
func looksLikeTLS(b []byte) bool {
	return len(b) >= 1 && b[0] == 0x16 && (len(b) < 2 || b[1] == 0x03)
}

// ParseClientHello reads the TLS records at the start of b and returns
// the host name of the server_name extension of the ClientHello they carry
// ("" when there is none). It returns errNeedMore while the ClientHello is
// incomplete; any other error is final.
func ParseClientHello(b []byte) (string, error) {
	var hs []byte // the handshake bytes, reassembled across records
	for {
		if len(b) < 5 {
			return "", errNeedMore
		}
		if b[0] != 0x16 || b[1] != 0x03 {
			return "", errNotClientHello
		}
		n := int(binary.BigEndian.Uint16(b[3:5]))
		if n == 0 || n > 1<<14 {
			return "", errBadClientHello
		}
		if len(b) < 5+n {
			return "", errNeedMore
		}
		hs = append(hs, b[5:5+n]...)
		b = b[5+n:]
		if len(hs) < 4 {
			continue
		}
		if hs[0] != 0x01 { // client_hello
			return "", errNotClientHello
		}
		msgLen := int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3])
		if msgLen > maxClientHello {
			return "", errHelloTooLarge
		}
		if len(hs) >= 4+msgLen {
			return parseHelloBody(hs[4 : 4+msgLen])
		}
		if len(hs) > maxClientHello {
			return "", errHelloTooLarge
		}
	}
}

// reader is a bounds-checked cursor over a byte slice.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n < 0 || len(r.b) < n {
		r.bad = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() int {
	b := r.take(1)
	if b == nil {
		return 0
	}
	return int(b[0])
}

func (r *reader) u16() int {
	b := r.take(2)
	if b == nil {
		return 0
	}
	return int(binary.BigEndian.Uint16(b))
}

func parseHelloBody(body []byte) (string, error) {
	r := &reader{b: body}
	r.take(2)  // legacy_version
	r.take(32) // random
	if sid := r.u8(); sid > 32 {
		return "", errBadClientHello
	} else {
		r.take(sid)
	}
	cs := r.u16()
	if cs < 2 || cs%2 != 0 {
		return "", errBadClientHello
	}
	r.take(cs)
	cm := r.u8()
	if cm < 1 {
		return "", errBadClientHello
	}
	r.take(cm)
	if r.bad {
		return "", errBadClientHello
	}
	if len(r.b) == 0 {
		return "", nil // no extensions at all
	}
	extLen := r.u16()
	if r.bad || extLen != len(r.b) {
		return "", errBadClientHello
	}
	seen := map[int]bool{}
	sni := ""
	for len(r.b) > 0 {
		typ, n := r.u16(), r.u16()
		data := r.take(n)
		if r.bad {
			return "", errBadClientHello
		}
		if seen[typ] {
			return "", errBadClientHello // RFC 8446: no extension twice
		}
		seen[typ] = true
		if typ != 0 { // server_name
			continue
		}
		name, err := parseServerName(data)
		if err != nil {
			return "", err
		}
		sni = name
	}
	return sni, nil
}

// parseServerName reads a server_name extension: a list of (type, name)
// with exactly one host_name.
func parseServerName(data []byte) (string, error) {
	r := &reader{b: data}
	listLen := r.u16()
	if r.bad || listLen != len(r.b) || listLen == 0 {
		return "", errBadClientHello
	}
	host := ""
	for len(r.b) > 0 {
		typ := r.u8()
		name := r.take(r.u16())
		if r.bad {
			return "", errBadClientHello
		}
		if typ != 0 {
			continue // no other name types are defined
		}
		if host != "" {
			return "", errBadClientHello // one host_name only (RFC 6066)
		}
		if len(name) == 0 {
			return "", errBadSNI
		}
		s := string(name)
		if _, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
			return "", errSNIAddress
		}
		n, ok := airlock.NormalizeHost(s)
		if !ok {
			return "", errBadSNI
		}
		host = n
	}
	if host == "" {
		return "", errBadSNI
	}
	return host, nil
}
