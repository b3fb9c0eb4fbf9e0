package postgres

import (
	"strings"
	"unicode/utf8"
)

// PostgreSQL text holds valid UTF-8 (the databases Airlock uses are
// UTF8) without NUL bytes, and JSONB refuses the escape \u0000. What a
// sandbox printed or sent can be any bytes, so free-form values are made
// storable on the way in: invalid UTF-8 and NUL become U+FFFD. (The
// SQLite store keeps the bytes as they are; the API's JSON shows the
// same text for both but for NUL.)

// clean makes s storable as text.
func clean(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// cleanJSON makes JSON produced by encoding/json (valid UTF-8 already)
// storable as JSONB: each \u0000 escape becomes \ufffd. An escape is one
// only where an even number of backslashes precedes it.
func cleanJSON(b []byte) string {
	s := string(b)
	if !strings.Contains(s, `\u0000`) {
		return s
	}
	var out strings.Builder
	out.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out.WriteByte(c)
			continue
		}
		// An escape: copy it whole, changing \u0000.
		if strings.HasPrefix(s[i:], `\u0000`) {
			out.WriteString(`\ufffd`)
			i += len(`\u0000`) - 1
			continue
		}
		out.WriteByte(c)
		if i+1 < len(s) {
			i++
			out.WriteByte(s[i])
		}
	}
	return out.String()
}

// maxText bounds each free-form text column of an egress or abuse event:
// the values come from what a sandbox sent.
const maxText = 1024

// clipText cleans s and cuts it to at most maxText bytes, at a rune
// boundary.
func clipText(s string) string {
	s = clean(s)
	if len(s) <= maxText {
		return s
	}
	s = s[:maxText]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
