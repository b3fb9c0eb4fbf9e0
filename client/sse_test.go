package client

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

func TestEventReader(t *testing.T) {
	in := ": keep-alive\n\nevent: start\ndata: {\"pid\":1}\n\nevent: stdout\r\ndata: a\r\ndata: b\r\n\r\ndata: {}\n\nevent: exit\ndata: {}\n\n"
	er := newEventReader(strings.NewReader(in))
	var got []string
	for {
		ev, err := er.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.name+"="+string(ev.data))
	}
	want := []string{`start={"pid":1}`, "stdout=a\nb", "={}", "exit={}"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q", got)
	}
	_, err := newEventReader(strings.NewReader("event: exit\ndata: {")).next()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut stream: %v", err)
	}
	er = newEventReader(strings.NewReader("data: " + strings.Repeat("x", 100) + "\n\n"))
	er.max = 50
	if _, err := er.next(); !errors.Is(err, ErrBadResponse) {
		t.Fatalf("oversized event: %v", err)
	}
	if b, err := decodeChunk([]byte(`{"data_b64":"//4="}`)); err != nil || string(b) != "\xff\xfe" {
		t.Fatalf("b64 chunk: %q %v", b, err)
	}
}

// FuzzEventReader reads arbitrary server streams: no panic, no event
// larger than the bound, and it always ends.
func FuzzEventReader(f *testing.F) {
	f.Add([]byte("event: start\ndata: {}\n\nevent: stdout\ndata: {\"data\":\"x\"}\n\n"))
	f.Add([]byte(": c\r\n\r\ndata:\ndata\n\n"))
	f.Add([]byte("event: error\ndata: {\"status\":409,\"code\":\"conflict\"}\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		er := newEventReader(strings.NewReader(string(b)))
		er.max = 1 << 10
		for i := 0; ; i++ {
			ev, err := er.next()
			if err != nil {
				return
			}
			if len(ev.data) > er.max || i > len(b) {
				t.Fatalf("event %d: %d bytes", i, len(ev.data))
			}
			decodeChunk(ev.data)
			problemEvent(ev.data, 200)
		}
	})
}

// The retry hint of an error event comes in its retry_after member.
func TestProblemEventRetryAfter(t *testing.T) {
	err := problemEvent([]byte(`{"type":"urn:airlock:problem:store-busy","title":"Service Unavailable","status":503,"detail":"busy","code":"unavailable","retry_after":3}`), 200)
	if d := airlock.RetryAfterOf(err); d != 3*time.Second {
		t.Fatalf("RetryAfterOf = %v, want 3s (%v)", d, err)
	}
	if err := problemEvent([]byte(`{"status":503,"code":"unavailable","retry_after":"soon"}`), 200); airlock.RetryAfterOf(err) != 0 {
		t.Fatalf("a retry_after that is not a number gave %v", airlock.RetryAfterOf(err))
	}
}
