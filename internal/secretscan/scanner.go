package secretscan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Mode says which rules a scan applies.
type Mode int

const (
	// ModeFiles applies every rule; the text-only ones (assignments of
	// secret-looking values) to text files only.
	ModeFiles Mode = iota
	// ModeMemory applies the host's exact values and the key patterns,
	// not the text-only rules: a memory image holds freed and foreign
	// bytes where a loose NAME=value means nothing.
	ModeMemory
)

// Config configures a Scanner.
type Config struct {
	// Known are the host's secret values; nil for none.
	Known *Known
	// Allow lists paths whose pattern findings are reported as allowed.
	// Nil means DefaultAllow; an empty non-nil slice allows nothing.
	Allow []Allow
	// MaxFileBytes: larger files are not read, and listed as skipped
	// (256 MiB if zero).
	MaxFileBytes int64
	// MaxFindings bounds the findings of one scan (1000 if zero); one
	// file contributes at most MaxFindings/10 + 1.
	MaxFindings int
}

// Validate fills defaults and checks c.
func (c *Config) Validate() error {
	if c.Allow == nil {
		c.Allow = DefaultAllow
	}
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = 256 << 20
	}
	if c.MaxFindings == 0 {
		c.MaxFindings = 1000
	}
	if c.MaxFileBytes < 0 || c.MaxFindings < 0 {
		return errors.New("secretscan: negative bound")
	}
	for _, a := range c.Allow {
		if err := a.validate(); err != nil {
			return err
		}
	}
	return nil
}

// Scanner scans files, trees and environments. It is safe for concurrent
// use; the host's values are read at the start of every scan.
type Scanner struct {
	cfg Config
}

// New validates cfg and returns a Scanner.
func New(cfg Config) (*Scanner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Scanner{cfg: cfg}, nil
}

// Default returns a Scanner with the default allow-list and no host
// values: the patterns alone.
func Default() *Scanner {
	s, err := New(Config{})
	if err != nil {
		panic(err)
	}
	return s
}

// WithKnown returns a copy of s that also matches the values of k.
func (s *Scanner) WithKnown(k *Known) *Scanner {
	c := *s
	c.cfg.Known = k
	return &c
}

// WithMaxFileBytes returns a copy of s with another size cap per file.
func (s *Scanner) WithMaxFileBytes(n int64) *Scanner {
	c := *s
	if n > 0 {
		c.cfg.MaxFileBytes = n
	}
	return &c
}

func (s *Scanner) matcher(mode Mode) *matcher {
	return newMatcher(s.cfg.Known.Secrets(), mode == ModeMemory)
}

// ScanBytes scans b as the content of a file named where.
func (s *Scanner) ScanBytes(where string, b []byte) []Finding {
	fs, _ := s.scanReader(s.matcher(ModeFiles), where, bytes.NewReader(b), s.cfg.MaxFindings, newBuffer(len(b)))
	return s.allow(fs)
}

// ScanEnv scans KEY=VALUE entries: each value for the host's values and
// the key patterns, and each variable whose name says it holds a secret
// (SecretName) for a value that is not empty, a path, a reference or a
// placeholder. Findings are named "env KEY".
func (s *Scanner) ScanEnv(env []string) []Finding {
	m := s.matcher(ModeFiles)
	var out []Finding
	longest := 0
	for _, kv := range env {
		longest = max(longest, len(kv))
	}
	buf := newBuffer(longest)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		where := "env " + printable(k)
		fs, _ := s.scanReader(m, where, strings.NewReader(v), s.cfg.MaxFindings, buf)
		for i := range fs {
			fs[i].Line = 0
		}
		out = append(out, fs...)
		if SecretName(k) && secretValue(v) && len(fs) == 0 {
			out = append(out, Finding{Rule: RuleSecretVariable, Where: where, Excerpt: printable(k) + "=" + mask("", len(v))})
		}
	}
	return out
}

// secretValue reports whether a variable's value may be a secret: at
// least 8 bytes, not a path, a shell or template reference, or a
// placeholder.
func secretValue(v string) bool {
	v = strings.TrimSpace(v)
	if len(v) < 8 || strings.HasPrefix(v, "/") || strings.HasPrefix(v, "./") ||
		strings.Contains(v, "${") || strings.HasPrefix(v, "$") || strings.Contains(v, "{{") {
		return false
	}
	return !isPlaceholder([]byte(v))
}

// allow marks the findings an allow entry covers.
func (s *Scanner) allow(fs []Finding) []Finding {
	for i := range fs {
		if fs[i].Rule == RuleHostSecret {
			continue
		}
		for _, a := range s.cfg.Allow {
			if a.covers(fs[i]) {
				fs[i].Allowed = a.Reason
				break
			}
		}
	}
	return fs
}

// chunkBytes is how much of a file is read at a time.
const chunkBytes = 1 << 20

// newBuffer returns a buffer for scanReader that reads up to n bytes (at
// most chunkBytes) at a time.
func newBuffer(n int) []byte {
	return make([]byte, 0, min(n, chunkBytes)+3*ctxBytes)
}

// errTooMany stops a file's scan at its findings bound.
var errTooMany = errors.New("too many findings")

// scanReader scans r in chunks, each with ctxBytes of the bytes before
// and after it in view of the rules. A file is text when its first 8 KiB
// hold no NUL byte. It collects at most perFile findings.
func (s *Scanner) scanReader(m *matcher, where string, r io.Reader, perFile int, buf []byte) ([]Finding, error) {
	if cap(buf) < 3*ctxBytes {
		buf = newBuffer(chunkBytes)
	}
	buf = buf[:0]
	var (
		base       int64 // file offset of buf[0]
		active     int   // buf[:active] has been scanned
		nlPos      int   // newlines in buf[:nlPos] are counted in lines
		lines      int
		text       bool
		first      = true
		out        []Finding
		genericEnd = -1 // end of the last generic match, window offsets
	)
	emit := func(h hit) {
		if len(out) >= perFile {
			return
		}
		if h.generic && h.start < genericEnd {
			return
		}
		if h.generic {
			genericEnd = h.end
		}
		if h.at > nlPos {
			lines += bytes.Count(buf[nlPos:h.at], []byte{'\n'})
			nlPos = h.at
		}
		f := Finding{Rule: h.rule, Where: where, Offset: base + int64(h.start), Excerpt: h.excerpt, end: base + int64(h.end)}
		if text {
			f.Line = lines + 1
		}
		out = append(out, f)
	}
	for {
		if cap(buf)-ctxBytes-len(buf) < ctxBytes { // a reader longer than the buffer was made for
			buf = append(newBuffer(chunkBytes), buf...)
		}
		n, err := io.ReadFull(r, buf[len(buf):cap(buf)-ctxBytes])
		buf = buf[:len(buf)+n]
		eof := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !eof {
			return tidy(out), err
		}
		if first {
			text = bytes.IndexByte(buf[:min(len(buf), 8192)], 0) < 0
			first = false
		}
		to := len(buf) - ctxBytes
		if eof {
			to = len(buf)
		}
		if to > active {
			m.scan(buf, active, to, text, emit)
			active = to
		}
		if eof || len(out) >= perFile {
			break
		}
		// Keep ctxBytes before the next bytes to scan.
		if drop := active - ctxBytes; drop > 0 {
			if nlPos < drop {
				lines += bytes.Count(buf[nlPos:drop], []byte{'\n'})
				nlPos = drop
			}
			copy(buf, buf[drop:])
			buf = buf[:len(buf)-drop]
			base += int64(drop)
			active -= drop
			nlPos -= drop
			genericEnd -= drop
		}
	}
	out = tidy(out)
	if len(out) >= perFile {
		return out, fmt.Errorf("%s: %w", where, errTooMany)
	}
	return out, nil
}
