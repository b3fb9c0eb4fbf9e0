package protocol_test

import (
	"context"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/agent/protocol"
)

func TestTokenMatches(t *testing.T) {
	const tok = "0123456789abcdef-_XYZ"
	tests := []struct {
		hello, want string
		ok          bool
	}{
		{tok, tok, true},
		{tok, tok + "x", false},
		{tok + "x", tok, false},
		{tok[:len(tok)-1] + "z", tok, false},
		{"", tok, false},
		{"", "", false}, // an empty want never matches
		{tok, "", false},
		{strings.ToUpper(tok), tok, false},
	}
	for _, tt := range tests {
		if got := (protocol.Hello{Token: tt.hello}).TokenMatches(tt.want); got != tt.ok {
			t.Errorf("hello %q, want %q: got %v", tt.hello, tt.want, got)
		}
	}
}

func TestClientSetChannel(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	tok := strings.Repeat("k", protocol.MinTokenBytes)
	ch := async(func() (int64, error) {
		return 0, c.SetChannel(context.Background(), "/run/airlock/agent.sock", tok)
	})
	id, req := a.expectRequest()
	if req.Op != protocol.OpChannel || req.Channel == nil || req.Channel.Path != "/run/airlock/agent.sock" || req.Channel.Token != tok {
		t.Fatalf("request %+v", req)
	}
	a.respond(id, protocol.Response{})
	if r := wait(t, ch, "set channel"); r.err != nil {
		t.Fatal(r.err)
	}
	// Bad values are refused before anything is sent.
	for _, bad := range []struct{ path, token string }{
		{"relative.sock", tok}, {"/run/../x", tok}, {"/run/x", "short"}, {"/run/x", tok + " "},
	} {
		if err := c.SetChannel(context.Background(), bad.path, bad.token); err == nil {
			t.Errorf("SetChannel(%q, %q) accepted", bad.path, bad.token)
		}
	}
	checkHealthy(t, c, a)
}
