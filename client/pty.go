package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/gorilla/websocket"

	"github.com/airlockhq/airlock"
)

// CreatePTY starts a terminal in a session (POST /v1/sessions/{id}/pty).
func (c *Client) CreatePTY(ctx context.Context, id string, req airlock.CreatePTYRequest) (*airlock.PTYInfo, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	var info airlock.PTYInfo
	if _, err := c.call(ctx, http.MethodPost, sessionPath(id, "pty"), nil, req, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// DeletePTY ends a terminal (DELETE /v1/sessions/{id}/pty/{pty_id}).
func (c *Client) DeletePTY(ctx context.Context, id, ptyID string) error {
	if err := needID("session", id); err != nil {
		return err
	}
	if err := needID("pty", ptyID); err != nil {
		return err
	}
	_, err := c.call(ctx, http.MethodDelete, sessionPath(id, "pty", url.PathEscape(ptyID)), nil, nil, nil)
	return err
}

// ErrPTYDetached is returned by PTYConn.Read when the server let go of
// the connection while the terminal runs on (it was too slow to keep up,
// or the server is stopping): attach again for the scrollback.
var ErrPTYDetached = errors.New("client: detached from the terminal")

// PTYConn is a client attached to a terminal over a WebSocket. Read
// returns the terminal's output (the scrollback first) and io.EOF once
// the terminal's program has exited (ExitCode then says how); Write types
// into it. Read is for one goroutine; Write and Resize may be called from
// another.
type PTYConn struct {
	ws  *websocket.Conn
	wmu sync.Mutex
	cur io.Reader // the binary message being read

	exitCode int
	exited   bool
}

// AttachPTY attaches to a terminal (GET /v1/sessions/{id}/pty/{pty_id},
// a WebSocket).
func (c *Client) AttachPTY(ctx context.Context, id, ptyID string) (*PTYConn, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	if err := needID("pty", ptyID); err != nil {
		return nil, err
	}
	u := c.endpoint(sessionPath(id, "pty", url.PathEscape(ptyID)), nil)
	h := http.Header{}
	h.Set("User-Agent", c.ua)
	if c.key != "" {
		h.Set("Authorization", "Bearer "+c.key)
	}
	ws := *u
	ws.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	d := websocket.Dialer{Proxy: http.ProxyFromEnvironment, Subprotocols: []string{"airlock.pty"}}
	conn, resp, err := d.DialContext(ctx, ws.String(), h)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			defer resp.Body.Close()
			return nil, problemError(resp)
		}
		return nil, fmt.Errorf("client: attach terminal %s: %w", ptyID, err)
	}
	return &PTYConn{ws: conn}, nil
}

// Read reads the terminal's output.
func (p *PTYConn) Read(b []byte) (int, error) {
	for {
		if p.cur != nil {
			n, err := p.cur.Read(b)
			if err == io.EOF {
				p.cur = nil
				if n > 0 {
					return n, nil
				}
				continue
			}
			return n, err
		}
		typ, r, err := p.ws.NextReader()
		if err != nil {
			return 0, p.ended(err)
		}
		if typ == websocket.BinaryMessage {
			p.cur = r
		}
	}
}

// ended turns the end of the WebSocket into Read's error.
func (p *PTYConn) ended(err error) error {
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		return err
	}
	if code, ok := strings.CutPrefix(ce.Text, "exit "); ok && ce.Code == websocket.CloseNormalClosure {
		if n, err := strconv.Atoi(code); err == nil {
			p.exitCode, p.exited = n, true
			return io.EOF
		}
	}
	if ce.Code == websocket.ClosePolicyViolation {
		return ErrPTYDetached
	}
	return fmt.Errorf("client: the terminal ended: %s", printable(ce.Text))
}

// ExitCode is the exit code of the terminal's program, once Read has
// returned io.EOF.
func (p *PTYConn) ExitCode() (int, bool) { return p.exitCode, p.exited }

// Write types b into the terminal.
func (p *PTYConn) Write(b []byte) (int, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if err := p.ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Resize changes the terminal's size.
func (p *PTYConn) Resize(cols, rows int) error {
	msg, _ := json.Marshal(map[string][]int{"resize": {cols, rows}})
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return p.ws.WriteMessage(websocket.TextMessage, msg)
}

// Close detaches from the terminal, which runs on.
func (p *PTYConn) Close() error {
	p.wmu.Lock()
	p.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "detach"))
	p.wmu.Unlock()
	return p.ws.Close()
}
