package store

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// What ValidText and ValidJSON make of any string is storable (valid UTF-8,
// no NUL, no \u0000 escape), and changes nothing but NUL and invalid
// bytes: the JSON still decodes, to the cleaned string.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"", "plain", "a\x00b", "\xff\xfe", `\u0000`, "\\\x00", `\\u0000`, "é\x00\xc3", strings.Repeat("x", 2000) + "\xe2\x82"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := ValidText(s)
		if !utf8.ValidString(c) || strings.IndexByte(c, 0) >= 0 {
			t.Fatalf("ValidText(%q) = %q: not storable", s, c)
		}
		if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 && c != s {
			t.Fatalf("ValidText(%q) = %q changed a storable string", s, c)
		}
		if clip := clip(ValidText(s)); !utf8.ValidString(clip) || len(clip) > maxText || !strings.HasPrefix(c, clip) {
			t.Fatalf("clip(ValidText(%q)) = %q", s, clip)
		}
		b, err := json.Marshal(map[string]string{s: s})
		if err != nil {
			t.Fatal(err)
		}
		j := ValidJSON(b)
		if strings.Contains(strings.ReplaceAll(j, `\\`, ""), `\u0000`) {
			t.Fatalf("ValidJSON(%s) = %s keeps a \\u0000 escape", b, j)
		}
		var back map[string]string
		if err := json.Unmarshal([]byte(j), &back); err != nil {
			t.Fatalf("ValidJSON(%s) = %s: %v", b, j, err)
		}
		// encoding/json made s valid UTF-8; ValidJSON changes only NUL
		// (to U+FFFD).
		var plain map[string]string
		if err := json.Unmarshal(b, &plain); err != nil {
			t.Fatal(err)
		}
		for k := range plain {
			want := strings.ReplaceAll(k, "\x00", "\uFFFD")
			if len(back) != 1 || back[want] != want {
				t.Fatalf("ValidJSON(%.200s) decodes to %.200q, want {%.200q: %.200q}", b, back, want, want)
			}
		}
	})
}
