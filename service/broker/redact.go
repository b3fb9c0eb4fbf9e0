package broker

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// redacted replaces every copy of a credential the broker finds.
var redacted = []byte("[REDACTED]")

// A redactor finds a credential in what an upstream returns, in the forms
// a careless (or hostile) upstream might echo it in:
//
//   - as it is, and hex-encoded (either case);
//   - base64, standard and URL alphabets, padded or not; and inside a
//     longer base64 text (such as a Basic credential "user:<secret>"),
//     where the secret's characters depend on its offset: for each of the
//     three offsets the run of characters that only the secret's bits
//     decide (all but at most one character at either end);
//   - any of these with characters escaped as in a URL (%XX, either case,
//     in a query or a path; "+" for a space) or in a JSON string (\/ and
//     \uXXXX).
//
// It matches on the bytes of a stream as they come, holding back only a
// possible start of a match until it completes or fails, so a copy split
// across reads is still found.
type redactor struct {
	targets [][]byte // the encoded forms
	fold    []bool   // per target: compare ASCII letters case-insensitively
	start   [256]bool
}

// minCore is the shortest base64 run inside a longer text that is looked
// for (shorter ones would redact innocent text).
const minCore = 6

func newRedactor(secret string) *redactor {
	r := &redactor{}
	s := []byte(secret)
	r.add(s, false)
	r.add([]byte(hex.EncodeToString(s)), true)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		r.add([]byte(enc.EncodeToString(s)), false)
		raw := enc.WithPadding(base64.NoPadding)
		r.add([]byte(raw.EncodeToString(s)), false)
		for k := 0; k < 3; k++ {
			e := raw.EncodeToString(append(make([]byte, k), s...))
			lo, hi := (8*k+5)/6, (8*k+8*len(s)-6)/6
			if hi+1-lo >= minCore {
				r.add([]byte(e[lo:hi+1]), false)
			}
		}
	}
	return r
}

func (r *redactor) add(t []byte, fold bool) {
	if len(t) == 0 {
		return
	}
	for _, have := range r.targets {
		if bytes.Equal(have, t) {
			return
		}
	}
	r.targets = append(r.targets, t)
	r.fold = append(r.fold, fold)
	c := t[0]
	r.start[c] = true
	if fold {
		r.start[lower(c)] = true
		r.start[upper(c)] = true
	}
	if c == ' ' {
		r.start['+'] = true
	}
	r.start['%'] = true
	r.start['\\'] = true
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func upper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// Results of matching one target at one position.
const (
	noMatch = iota
	fullMatch
	partialMatch // all bytes so far match, and the input ended
)

// unescape decodes one escaped character at the start of b: %XX, \/ or
// \uXXXX (a character of the Basic Multilingual Plane, as its UTF-8
// bytes). n is 0 when b does not start with one; more is set when b ends
// inside what could be one.
func unescape(b []byte, dec *[utf8.UTFMax]byte) (out []byte, n int, more bool) {
	switch {
	case len(b) == 0:
		return nil, 0, false
	case b[0] == '%':
		if len(b) < 3 {
			return nil, 0, allHex(b[1:])
		}
		v, ok := hexByte(b[1], b[2])
		if !ok {
			return nil, 0, false
		}
		dec[0] = v
		return dec[:1], 3, false
	case b[0] == '\\':
		if len(b) < 2 {
			return nil, 0, true
		}
		if b[1] == '/' {
			dec[0] = '/'
			return dec[:1], 2, false
		}
		if b[1] != 'u' {
			return nil, 0, false
		}
		if len(b) < 6 {
			return nil, 0, allHex(b[2:])
		}
		hi, ok1 := hexByte(b[2], b[3])
		lo, ok2 := hexByte(b[4], b[5])
		r := rune(hi)<<8 | rune(lo)
		if !ok1 || !ok2 || utf16.IsSurrogate(r) {
			return nil, 0, false
		}
		k := utf8.EncodeRune(dec[:], r)
		return dec[:k], 6, false
	}
	return nil, 0, false
}

func allHex(b []byte) bool {
	for _, c := range b {
		if _, ok := hexDigit(c); !ok {
			return false
		}
	}
	return true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func hexByte(a, b byte) (byte, bool) {
	x, ok1 := hexDigit(a)
	y, ok2 := hexDigit(b)
	return x<<4 | y, ok1 && ok2
}

// matchAt matches target t at b[i:]; for a full match it returns the end.
func (r *redactor) matchAt(t int, b []byte, i int) (end, result int) {
	target, fold := r.targets[t], r.fold[t]
	eq := func(x, c byte) bool { return x == c || fold && lower(x) == lower(c) }
	var dec [utf8.UTFMax]byte
	j, k := i, 0
	for k < len(target) {
		if j >= len(b) {
			return 0, partialMatch
		}
		if b[j] == '%' || b[j] == '\\' {
			v, n, more := unescape(b[j:], &dec)
			if more {
				return 0, partialMatch
			}
			if n > 0 && hasPrefix(target[k:], v, eq) {
				j, k = j+n, k+len(v)
				continue
			}
		}
		if c := target[k]; eq(b[j], c) || c == ' ' && b[j] == '+' {
			j, k = j+1, k+1
			continue
		}
		return 0, noMatch
	}
	return j, fullMatch
}

func hasPrefix(s, prefix []byte, eq func(x, c byte) bool) bool {
	if len(prefix) > len(s) {
		return false
	}
	for i := range prefix {
		if !eq(prefix[i], s[i]) {
			return false
		}
	}
	return true
}

// scan redacts b. Unless eof, it stops where a match might begin that b
// ends inside, and returns that offset as held (else len(b)).
func (r *redactor) scan(b []byte, eof bool, out []byte) ([]byte, int) {
	from := 0
	for i := 0; i < len(b); {
		if !r.start[b[i]] {
			i++
			continue
		}
		end, partial := 0, false
		for t := range r.targets {
			e, res := r.matchAt(t, b, i)
			switch {
			case res == fullMatch && e > end:
				end = e
			case res == partialMatch:
				partial = true
			}
		}
		if partial && !eof {
			return append(out, b[from:i]...), i
		}
		if end > 0 {
			out = append(append(out, b[from:i]...), redacted...)
			i, from = end, end
			continue
		}
		i++
	}
	return append(out, b[from:]...), len(b)
}

// redact returns s with every copy of the credential replaced.
func (r *redactor) redact(s string) string {
	out, _ := r.scan([]byte(s), true, nil)
	return string(out)
}

// contains reports whether s holds a copy of the credential.
func (r *redactor) contains(s string) bool {
	out, _ := r.scan([]byte(s), true, nil)
	return !bytes.Equal(out, []byte(s))
}

// copy copies src to dst with every copy of the credential replaced,
// streaming. It stops with an error after max bytes (what is held back
// then is dropped).
func (r *redactor) copy(dst io.Writer, src io.Reader, max int64) (int64, error) {
	var pending, out []byte
	var total, read int64
	buf := make([]byte, 32<<10)
	for {
		n, rerr := src.Read(buf)
		read += int64(n)
		if read > max {
			return total, fmt.Errorf("response over %d bytes cut", max)
		}
		pending = append(pending, buf[:n]...)
		var held int
		out, held = r.scan(pending, rerr != nil, out[:0])
		if len(out) > 0 {
			w, err := dst.Write(out)
			total += int64(w)
			if err != nil {
				return total, err
			}
		}
		pending = append(pending[:0], pending[held:]...)
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
	}
}
