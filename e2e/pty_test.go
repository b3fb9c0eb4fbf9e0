package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// ptyReader reads a terminal in the background; the test waits for
// conditions on what it has read.
type ptyReader struct {
	conn *client.PTYConn
	mu   sync.Mutex
	buf  bytes.Buffer
	err  error
	more chan struct{} // closed and replaced on every read
	done chan struct{} // closed when Read returned an error
}

func readPTY(conn *client.PTYConn) *ptyReader {
	r := &ptyReader{conn: conn, more: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		b := make([]byte, 4096)
		for {
			n, err := conn.Read(b)
			r.mu.Lock()
			r.buf.Write(b[:n])
			if err != nil {
				r.err = err
			}
			close(r.more)
			r.more = make(chan struct{})
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return r
}

// waitFor waits until the output holds s (after what it held at from).
func (r *ptyReader) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		ok, more := strings.Contains(r.buf.String(), s), r.more
		out, err := r.buf.String(), r.err
		r.mu.Unlock()
		if ok {
			return
		}
		if err != nil {
			t.Fatalf("terminal ended (%v) before %q; output %q", err, s, out)
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("no %q in the terminal's output within 30s; output %q", s, out)
		}
	}
}

// end waits for the reader to stop and returns its error.
func (r *ptyReader) end(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the terminal did not end within 30s")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func wantStatus(t *testing.T, what string, err error, status int) {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != status {
		t.Errorf("%s: got %v, want HTTP %d", what, err, status)
	}
}

func TestPTY(t *testing.T) {
	s := newStack(t, cold)
	defer s.close(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := s.a.client
	sess, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSession(context.Background(), sess.ID)

	info, err := c.CreatePTY(ctx, sess.ID, airlock.CreatePTYRequest{Cols: 80, Rows: 24, Env: map[string]string{"PTY_TEST": "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	if info.PTYID == "" || info.SessionID != sess.ID || info.PID <= 0 || info.Cols != 80 || info.Rows != 24 {
		t.Fatalf("created %+v", info)
	}
	conn, err := c.AttachPTY(ctx, sess.ID, info.PTYID)
	if err != nil {
		t.Fatal(err)
	}
	r := readPTY(conn)
	conn.Write([]byte("echo hi $PTY_TEST $(pwd)\n"))
	r.waitFor(t, "hi yes /workspace\r\n") // the output, not the echoed input
	conn.Write([]byte("stty size\n"))
	r.waitFor(t, "24 80\r\n")
	if err := conn.Resize(132, 40); err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("stty size; echo marker-$((6*7))\n"))
	r.waitFor(t, "40 132\r\n")
	r.waitFor(t, "marker-42\r\n")

	// Detach, and attach again: the scrollback holds the last screen.
	conn.Close()
	r.end(t)
	conn, err = c.AttachPTY(ctx, sess.ID, info.PTYID)
	if err != nil {
		t.Fatal(err)
	}
	r = readPTY(conn)
	r.waitFor(t, "marker-42\r\n")
	conn.Write([]byte("echo again\n"))
	r.waitFor(t, "again\r\n")

	// Bad frames end the WebSocket, not the terminal.
	if err := conn.Resize(0, 5); err != nil {
		t.Fatal(err)
	}
	if err := r.end(t); err == nil || err == io.EOF {
		t.Errorf("a bad resize: read error %v", err)
	}
	conn, err = c.AttachPTY(ctx, sess.ID, info.PTYID)
	if err != nil {
		t.Fatal(err)
	}
	r = readPTY(conn)

	// Exit ends it: the close frame carries the exit code, and it is gone.
	conn.Write([]byte("exit 3\n"))
	if err := r.end(t); err != io.EOF {
		t.Fatalf("after exit: read error %v, want EOF", err)
	}
	if code, ok := conn.ExitCode(); !ok || code != 3 {
		t.Errorf("exit code %d, %v; want 3", code, ok)
	}
	_, err = c.AttachPTY(ctx, sess.ID, info.PTYID)
	wantStatus(t, "attach after exit", err, http.StatusNotFound)

	// DELETE ends a terminal; its attached clients see it end.
	p2, err := c.CreatePTY(ctx, sess.ID, airlock.CreatePTYRequest{Cols: 80, Rows: 24, Cmd: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err = c.AttachPTY(ctx, sess.ID, p2.PTYID)
	if err != nil {
		t.Fatal(err)
	}
	r = readPTY(conn)
	if err := c.DeletePTY(ctx, sess.ID, p2.PTYID); err != nil {
		t.Fatal(err)
	}
	if err := r.end(t); err != io.EOF {
		t.Errorf("after DELETE: read error %v, want EOF", err)
	}
	err = c.DeletePTY(ctx, sess.ID, p2.PTYID)
	wantStatus(t, "delete twice", err, http.StatusNotFound)

	// Limits and bad requests.
	for _, req := range []airlock.CreatePTYRequest{{Cols: 0, Rows: 24}, {Cols: 80, Rows: 1001}, {Cols: 80, Rows: 24, Cmd: []string{""}}} {
		_, err := c.CreatePTY(ctx, sess.ID, req)
		wantStatus(t, "bad request", err, http.StatusBadRequest)
	}
	var ids []string
	for range airlock.MaxPTYsPerSession {
		p, err := c.CreatePTY(ctx, sess.ID, airlock.CreatePTYRequest{Cols: 80, Rows: 24, Cmd: []string{"sleep", "600"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.PTYID)
	}
	_, err = c.CreatePTY(ctx, sess.ID, airlock.CreatePTYRequest{Cols: 80, Rows: 24})
	wantStatus(t, "one terminal too many", err, http.StatusConflict)

	// Another tenant's key, and a revoked key, are refused on every
	// route; a terminal is reached only through its own session.
	other := s.b.client
	_, err = other.CreatePTY(ctx, sess.ID, airlock.CreatePTYRequest{Cols: 80, Rows: 24})
	wantStatus(t, "other tenant create", err, http.StatusNotFound)
	_, err = other.AttachPTY(ctx, sess.ID, ids[0])
	wantStatus(t, "other tenant attach", err, http.StatusNotFound)
	err = other.DeletePTY(ctx, sess.ID, ids[0])
	wantStatus(t, "other tenant delete", err, http.StatusNotFound)

	secret, key := airlock.NewAPIKey(s.a.tenant.ID, "", time.Now())
	if err := s.store.CreateAPIKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.RevokeAPIKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	revoked, err := client.New(client.Config{BaseURL: s.url, APIKey: secret})
	if err != nil {
		t.Fatal(err)
	}
	_, err = revoked.CreatePTY(ctx, sess.ID, airlock.CreatePTYRequest{Cols: 80, Rows: 24})
	wantStatus(t, "revoked create", err, http.StatusUnauthorized)
	_, err = revoked.AttachPTY(ctx, sess.ID, ids[0])
	wantStatus(t, "revoked attach", err, http.StatusUnauthorized)
	err = revoked.DeletePTY(ctx, sess.ID, ids[0])
	wantStatus(t, "revoked delete", err, http.StatusUnauthorized)

	sess2, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSession(context.Background(), sess2.ID)
	_, err = c.AttachPTY(ctx, sess2.ID, ids[0])
	wantStatus(t, "a terminal through another session", err, http.StatusNotFound)
	err = c.DeletePTY(ctx, sess2.ID, ids[0])
	wantStatus(t, "delete through another session", err, http.StatusNotFound)

	// A browser offers its key as a subprotocol; a wrong one is 401.
	wsURL := "ws" + strings.TrimPrefix(s.url, "http") + "/v1/sessions/" + sess.ID + "/pty/" + ids[0]
	for _, tc := range []struct {
		key  string
		want int
	}{{s.a.key, http.StatusSwitchingProtocols}, {secret, http.StatusUnauthorized}, {s.b.key, http.StatusNotFound}} {
		d := websocket.Dialer{Subprotocols: []string{"airlock.pty", "bearer." + tc.key}}
		ws, resp, err := d.DialContext(ctx, wsURL, nil)
		if resp == nil || resp.StatusCode != tc.want {
			t.Errorf("subprotocol key: %v, %v; want %d", resp, err, tc.want)
		}
		if ws != nil {
			if ws.Subprotocol() != "airlock.pty" {
				t.Errorf("subprotocol %q", ws.Subprotocol())
			}
			ws.Close()
		}
	}
	// Without an upgrade the route answers a problem.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/sessions/"+sess.ID+"/pty/"+ids[0], nil)
	req.Header.Set("Authorization", "Bearer "+s.a.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET without upgrade: %d", resp.StatusCode)
	}

	// The session's end ends its terminals.
	conn, err = c.AttachPTY(ctx, sess.ID, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	r = readPTY(conn)
	if _, err := c.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.end(t); err == nil {
		t.Error("a terminal of an ended session did not end")
	}
}
