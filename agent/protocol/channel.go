package protocol

import (
	"context"
	"crypto/subtle"
	"fmt"
	"path"
	"strings"
)

// The channel: a unix socket path inside the sandbox where a host listens
// (bind-mounted from the host, see runsc --host-uds). The host gives it to
// the agent with OpChannel on a live connection. When that connection
// ends, the agent keeps its retained programs, code contexts and warm
// runtimes, and dials the path again and again until a host answers; its
// Hello on every connection it dials carries the token, which the host
// checks (Hello.TokenMatches) before it trusts the connection.

// Bounds of a channel token.
const (
	MinTokenBytes = 16
	MaxTokenBytes = 128
)

// ChannelRequest tells the agent where to dial when its host goes away. A
// later one replaces it.
type ChannelRequest struct {
	Path  string `json:"path"`  // absolute and clean, at most MaxPathBytes
	Token string `json:"token"` // MinTokenBytes to MaxTokenBytes of [A-Za-z0-9_-]
}

// Validate checks a channel request.
func (c *ChannelRequest) Validate() error {
	if c.Path == "" || len(c.Path) > MaxPathBytes || !path.IsAbs(c.Path) ||
		path.Clean(c.Path) != c.Path || strings.ContainsRune(c.Path, 0) {
		return fmt.Errorf("bad channel path")
	}
	if !validToken(c.Token) {
		return fmt.Errorf("bad channel token")
	}
	return nil
}

// validToken reports whether t is a well-formed channel token.
func validToken(t string) bool {
	if len(t) < MinTokenBytes || len(t) > MaxTokenBytes {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// TokenMatches reports whether the Hello carries the token want, in time
// that does not depend on how much of it matches. An empty want never
// matches.
func (h Hello) TokenMatches(want string) bool {
	if want == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(h.Token), []byte(want)) == 1
}

// SetChannel tells the agent where to dial, and with which token, when
// this connection ends.
func (c *Client) SetChannel(ctx context.Context, path, token string) error {
	r := Request{Op: OpChannel, Channel: &ChannelRequest{Path: path, Token: token}}
	if err := r.Validate(); err != nil {
		return fmt.Errorf("protocol: %w", err)
	}
	_, err := c.roundTrip(ctx, r)
	return err
}
