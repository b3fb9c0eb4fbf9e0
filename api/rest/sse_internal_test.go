package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
)

func TestWantsEventStream(t *testing.T) {
	for accept, want := range map[string]bool{
		"text/event-stream":                         true,
		"application/json, text/event-stream;q=0.9": true,
		"text/event-stream;q=0":                     false,
		"application/json":                          false,
		"":                                          false,
		"text/*":                                    false,
	} {
		r := httptest.NewRequest("POST", "/", nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		if got := wantsEventStream(r); got != want {
			t.Errorf("Accept %q: %v", accept, got)
		}
	}
}

// FuzzIncompleteTail: holding back the tail it names leaves valid text
// valid, and never holds back more than a character's start.
func FuzzIncompleteTail(f *testing.F) {
	f.Add([]byte("h\xc3"))
	f.Add([]byte("\xe2\x82"))
	f.Add([]byte("ok"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k := incompleteTail(b)
		if k < 0 || k > 3 || k > len(b) {
			t.Fatalf("incompleteTail(%q) = %d", b, k)
		}
		if utf8.Valid(b) && k != 0 {
			t.Fatalf("valid text %q held back %d", b, k)
		}
		if k > 0 && (utf8.FullRune(b[len(b)-k:]) || !utf8.RuneStart(b[len(b)-k])) {
			t.Fatalf("held back %q of %q", b[len(b)-k:], b)
		}
	})
}

// FuzzParseSignal: arbitrary signal members are a number in range or an
// error, never a panic.
func FuzzParseSignal(f *testing.F) {
	for _, s := range []string{`15`, `"TERM"`, `"sigint"`, `0`, `65`, `"NOPE"`, `null`, `1e3`, `"SIGSIGKILL"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		n, err := parseSignal(raw)
		if err == nil && (n < 1 || n > 64) {
			t.Fatalf("parseSignal(%q) = %d", raw, n)
		}
	})
}

// An error event cannot carry a Retry-After header (the stream's headers
// went out when it started): its retry hint is the retry_after member,
// in whole seconds rounded up; problems without one, and internal
// errors, have none.
func TestStreamProblemRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want any
	}{
		{"busy store", airlock.Problem(airlock.EUNAVAILABLE, "store-busy", "busy").RetryLater(1500 * time.Millisecond), 2},
		{"no hint", airlock.Problem(airlock.ENOTFOUND, "session-not-found", "gone"), nil},
		{"internal", fmt.Errorf("wrapped: %w", errors.New("disk on fire")), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := streamProblem(tt.err)
			got, ok := p.Extensions[RetryAfterMember]
			if tt.want == nil {
				if ok {
					t.Fatalf("retry_after %v, want none", got)
				}
				return
			}
			if got != tt.want {
				t.Fatalf("retry_after %v, want %v", got, tt.want)
			}
			b, err := json.Marshal(p)
			if err != nil || !strings.Contains(string(b), `"retry_after":2`) {
				t.Fatalf("encoded %s %v", b, err)
			}
		})
	}
}
