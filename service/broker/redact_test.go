package broker

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// A credential with characters that every escaping changes.
const testSecret = "tok_9f8e+7d6c/5b4a=3928&1706 f5e4?d3c2~b1a0%é"

// echoes are the forms an upstream might echo a credential in. embedded
// ones hold it inside a longer encoded text, where only most of it can be
// told apart.
var echoes = []struct {
	name     string
	enc      func(s string) string
	embedded bool
}{
	{"raw", func(s string) string { return s }, false},
	{"base64", func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }, false},
	{"base64 unpadded", func(s string) string { return base64.RawStdEncoding.EncodeToString([]byte(s)) }, false},
	{"base64url", func(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }, false},
	{"base64url unpadded", func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }, false},
	{"hex", func(s string) string { return hex.EncodeToString([]byte(s)) }, false},
	{"HEX", func(s string) string { return strings.ToUpper(hex.EncodeToString([]byte(s))) }, false},
	{"query escaped", url.QueryEscape, false},
	{"path escaped", url.PathEscape, false},
	{"every byte escaped, lower case", func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			fmt.Fprintf(&b, "%%%02x", s[i])
		}
		return b.String()
	}, false},
	{"JSON string", func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }, false},
	{"JSON, ASCII only", func(s string) string {
		var b strings.Builder
		for _, r := range s {
			if r >= 0x80 || r == '/' || r == '&' {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
		return b.String()
	}, false},
	{"JSON with escaped slashes", func(s string) string { return strings.ReplaceAll(s, "/", `\/`) }, false},
	{"base64 in a query", func(s string) string { return url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(s))) }, false},
	{"Basic user:secret", func(s string) string { return base64.StdEncoding.EncodeToString([]byte("user:" + s)) }, true},
	{"base64 of a JSON document", func(s string) string {
		return base64.URLEncoding.EncodeToString([]byte(`{"a":1,"token":"` + s + `","b":"xy"}`))
	}, true},
	{"base64 at offset 2", func(s string) string { return base64.RawStdEncoding.EncodeToString([]byte("ab" + s + "c")) }, true},
}

// window is how many bytes of the credential in a row count as a leak.
const window = 6

// leak looks for the credential in text by decoding it every way the
// tests echo it and searching the result for any window of the
// credential's bytes. It is independent of the redactor's matching.
func leak(text, secret string) string {
	base := map[string]string{"raw": text}
	if s, err := url.QueryUnescape(text); err == nil {
		base["query-unescaped"] = s
	}
	if s, err := url.PathUnescape(text); err == nil {
		base["path-unescaped"] = s
	}
	var js string
	if err := json.Unmarshal([]byte(`"`+strings.ReplaceAll(text, `"`, ``)+`"`), &js); err == nil {
		base["json-unescaped"] = js
	}
	decoded := map[string]string{}
	for how, t := range base {
		decoded[how] = t
		for i, run := range runs(t, "0123456789abcdefABCDEF") {
			for off := 0; off < 2 && off < len(run); off++ {
				r := run[off:]
				b, _ := hex.DecodeString(r[:len(r)&^1])
				decoded[fmt.Sprintf("%s, hex run %d at %d", how, i, off)] = string(b)
			}
		}
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			for i, run := range runs(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_") {
				for off := 0; off < 4 && off < len(run); off++ {
					r := run[off:]
					b, _ := enc.DecodeString(r[:len(r)/4*4])
					decoded[fmt.Sprintf("%s, base64 run %d at %d", how, i, off)] = string(b)
				}
			}
		}
	}
	for how, s := range decoded {
		for i := 0; i+window <= len(secret); i++ {
			if strings.Contains(s, secret[i:i+window]) {
				return fmt.Sprintf("%q of the credential (%s)", secret[i:i+window], how)
			}
		}
	}
	return ""
}

// runs returns the maximal runs of text made of chars in set.
func runs(text, set string) []string {
	var out []string
	start := -1
	for i := 0; i <= len(text); i++ {
		in := i < len(text) && strings.IndexByte(set, text[i]) >= 0
		switch {
		case in && start < 0:
			start = i
		case !in && start >= 0:
			out = append(out, text[start:i])
			start = -1
		}
	}
	return out
}

// splitReader returns its text in two reads, split at one offset.
type splitReader struct {
	parts [][]byte
}

func (r *splitReader) Read(b []byte) (int, error) {
	for len(r.parts) > 0 && len(r.parts[0]) == 0 {
		r.parts = r.parts[1:]
	}
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(b, r.parts[0])
	r.parts[0] = r.parts[0][n:]
	return n, nil
}

// Every echo form is found, wherever the reads split the text; nothing
// else is changed.
func TestRedactorEveryEchoEverySplit(t *testing.T) {
	rd := newRedactor(testSecret)
	for _, e := range echoes {
		t.Run(e.name, func(t *testing.T) {
			enc := e.enc(testSecret)
			text := "before {" + enc + "} between {" + enc + "} after"
			if leak(text, testSecret) == "" {
				t.Fatalf("the leak check does not see %q", enc)
			}
			for cut := 0; cut <= len(text); cut++ {
				var out bytes.Buffer
				src := &splitReader{parts: [][]byte{[]byte(text[:cut]), []byte(text[cut:])}}
				if _, err := rd.copy(&out, src, 1<<20); err != nil {
					t.Fatal(err)
				}
				got := out.String()
				if l := leak(got, testSecret); l != "" {
					t.Fatalf("split at %d: %s leaked in %q", cut, l, got)
				}
				if !e.embedded && got != "before {[REDACTED]} between {[REDACTED]} after" {
					t.Fatalf("split at %d: %q", cut, got)
				}
				if e.embedded && strings.Count(got, "[REDACTED]") != 2 {
					t.Fatalf("split at %d: %q", cut, got)
				}
			}
			if !rd.contains("x-" + enc) {
				t.Errorf("contains(%q) is false", enc)
			}
		})
	}
	for _, s := range []string{"", "plain text with tok_ and 9f8e and b1a0", "%", `\u00`, "%2", strings.Repeat("%25", 50)} {
		if got := rd.redact(s); got != s {
			t.Errorf("redact(%q) = %q, want it unchanged", s, got)
		}
	}
}

// One byte at a time, the slowest upstream.
func TestRedactorOneByteReads(t *testing.T) {
	rd := newRedactor(testSecret)
	var text strings.Builder
	for _, e := range echoes {
		text.WriteString(e.name + ": " + e.enc(testSecret) + "\n")
	}
	parts := make([][]byte, text.Len())
	for i := range parts {
		parts[i] = []byte{text.String()[i]}
	}
	var out bytes.Buffer
	if _, err := rd.copy(&out, &splitReader{parts: parts}, 1<<20); err != nil {
		t.Fatal(err)
	}
	if l := leak(out.String(), testSecret); l != "" {
		t.Fatalf("%s leaked in %q", l, out.String())
	}
	if n := strings.Count(out.String(), "[REDACTED]"); n != len(echoes) {
		t.Errorf("%d redactions, want %d: %s", n, len(echoes), out.String())
	}
}

// However the reads split a text, the stream is redacted exactly as the
// whole text is.
func FuzzRedactorSplits(f *testing.F) {
	for _, e := range echoes {
		f.Add("a "+e.enc(testSecret)+" b", uint16(7), uint16(3))
	}
	f.Add(`%%2\u00%7`, uint16(1), uint16(1))
	rd := newRedactor(testSecret)
	f.Fuzz(func(t *testing.T, text string, a, b uint16) {
		want := rd.redact(text)
		x, y := int(a)%(len(text)+1), int(b)%(len(text)+1)
		if x > y {
			x, y = y, x
		}
		var out bytes.Buffer
		src := &splitReader{parts: [][]byte{[]byte(text[:x]), []byte(text[x:y]), []byte(text[y:])}}
		if _, err := rd.copy(&out, src, 1<<20); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Fatalf("split at %d, %d: %q, whole: %q", x, y, out.String(), want)
		}
	})
}

// An upstream that echoes the credential it was sent in every form, in
// its body (one byte per write, so the broker's reads split it) and in
// headers (values and a name): the sandbox gets none of it.
func TestBrokerRedactsEveryEcho(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if r.URL.Path == "/api/v1/compressed" {
			w.Header().Set("Content-Encoding", "br")
			io.WriteString(w, "opaque "+cred)
			return
		}
		i, err := strconv.Atoi(path.Base(r.URL.Path))
		if err != nil || i >= len(echoes) {
			http.NotFound(w, r)
			return
		}
		enc := echoes[i].enc(cred)
		w.Header().Set("X-Echo", "got "+enc)
		w.Header().Set("Location", "https://elsewhere.test/?t="+enc)
		w.Header().Set("X-Tok-"+hex.EncodeToString([]byte(cred)), "1")
		w.Header().Set("X-Plain", "kept")
		body := "before " + enc + " after"
		for i := 0; i < len(body); i++ {
			io.WriteString(w, body[i:i+1])
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	b, err := New(Config{
		Scopes: []Scope{{
			Name: "echo", Upstream: srv.URL + "/api", Methods: []string{"GET"}, Paths: []string{"/v1/*"},
			Credential: Credential{Env: "ECHO_TOKEN"}, Tenants: []string{"t"},
		}},
		Record: func(*airlock.EgressEvent) {},
		Getenv: func(k string) string {
			if k == "ECHO_TOKEN" {
				return testSecret
			}
			return ""
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	get := func(p string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "http://broker.airlock.internal/echo"+p, nil)
		return ServeTest(b, r, airlock.BrokerCaller{TenantID: "t", SessionID: "s", Scopes: []string{"echo"}})
	}
	for i, e := range echoes {
		t.Run(e.name, func(t *testing.T) {
			w := get("/v1/" + strconv.Itoa(i))
			if w.Code != 200 {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if l := leak(w.Body.String(), testSecret); l != "" || !strings.Contains(w.Body.String(), "[REDACTED]") {
				t.Errorf("body %q: %s", w.Body, l)
			}
			for k, vs := range w.Header() {
				if l := leak(k, testSecret); l != "" {
					t.Errorf("header name %s: %s", k, l)
				}
				for _, v := range vs {
					if l := leak(v, testSecret); l != "" {
						t.Errorf("header %s: %q: %s", k, v, l)
					}
				}
			}
			if w.Header().Get("X-Plain") != "kept" {
				t.Error("a plain header was dropped")
			}
		})
	}
	t.Run("an encoded body is refused", func(t *testing.T) {
		w := get("/v1/compressed")
		if w.Code != http.StatusBadGateway || !strings.Contains(w.Body.String(), "broker-upstream-encoded") || strings.Contains(w.Body.String(), testSecret) {
			t.Errorf("%d %s", w.Code, w.Body)
		}
	})
}
