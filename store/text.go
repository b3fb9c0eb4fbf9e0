package store

import (
	"strings"
	"unicode/utf8"
)

// maxText bounds each free-form text column of an egress or abuse event:
// the values come from what a sandbox sent.
const maxText = 1024

// text, json and clip make values storable in the store's dialect.
func (db *DB) text(s string) string { return db.d.Text(s) }

func (db *DB) json(b []byte) string { return db.d.JSON(b) }

// clip makes s storable and cuts it to at most maxText bytes, not
// splitting the last character.
func (db *DB) clip(s string) string { return clip(db.d.Text(s)) }

func clip(s string) string {
	if len(s) <= maxText {
		return s
	}
	cut := maxText
	for cut > maxText-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if !utf8.RuneStart(s[cut]) {
		cut = maxText // not UTF-8 there: cut at the bound
	}
	return s[:cut]
}

// ValidText makes s storable as PostgreSQL text (valid UTF-8 without NUL
// bytes): invalid UTF-8 and NUL become U+FFFD. What a sandbox printed or
// sent can be any bytes.
func ValidText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// ValidJSON makes JSON produced by encoding/json (valid UTF-8 already)
// storable as PostgreSQL JSONB, which refuses the escape \u0000: each
// becomes \ufffd. An escape is one only where an even number of
// backslashes precedes it.
func ValidJSON(b []byte) string {
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
