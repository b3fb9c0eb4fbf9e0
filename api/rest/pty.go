package rest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/airlockhq/airlock"
)

// Terminals of a session (docs/terminals.md):
//
//	POST   /v1/sessions/{id}/pty            {"cols", "rows", "cmd", "env"} -> 201 PTYInfo
//	GET    /v1/sessions/{id}/pty/{pty_id}   WebSocket: binary frames both ways,
//	                                        a text frame {"resize": [cols, rows]}
//	DELETE /v1/sessions/{id}/pty/{pty_id}   204
//
// When the terminal's program exits, the WebSocket gets a close frame
// (1000) whose reason is "exit <code>".

// PTYSubprotocol is the WebSocket subprotocol the server answers with
// when a client offers it. A browser, which cannot set the Authorization
// header of a WebSocket, offers it together with "bearer.<key>".
const PTYSubprotocol = "airlock.pty"

// ptyBearerPrefix marks the subprotocol that carries a key.
const ptyBearerPrefix = "bearer."

// WebSocket bounds.
const (
	ptyReadLimit    = 64 << 10 // one client message
	ptyPingInterval = 30 * time.Second
	ptyWriteTimeout = 10 * time.Second
)

// Close codes and reasons the server sends.
const (
	closeExited   = websocket.CloseNormalClosure // the program exited: "exit <code>"
	closeEnded    = websocket.CloseGoingAway     // the session or server ended
	closeTooSlow  = websocket.ClosePolicyViolation
	closeBadFrame = websocket.CloseUnsupportedData
)

func (s *Server) ptys(w http.ResponseWriter, r *http.Request) (airlock.PTYService, bool) {
	p := s.cfg.PTYs
	if p == nil {
		p, _ = s.cfg.Sessions.(airlock.PTYService)
	}
	if p == nil {
		s.error(w, r, errorf(airlock.ENOTIMPLEMENTED, "ptys-disabled", "terminals are not enabled on this server"))
		return nil, false
	}
	return p, true
}

// createPTY starts a terminal: POST /v1/sessions/{id}/pty.
func (s *Server) createPTY(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.ptys(w, r)
	if !ok {
		return
	}
	var req airlock.CreatePTYRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	info, err := svc.CreatePTY(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), req)
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusCreated, info)
}

// deletePTY ends a terminal: DELETE /v1/sessions/{id}/pty/{pty_id}.
func (s *Server) deletePTY(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.ptys(w, r)
	if !ok {
		return
	}
	if err := svc.DeletePTY(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), r.PathValue("pty_id")); err != nil {
		s.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ptyMessage is a client's text frame.
type ptyMessage struct {
	Resize []int `json:"resize"`
}

// attachPTY attaches to a terminal over a WebSocket:
// GET /v1/sessions/{id}/pty/{pty_id}.
func (s *Server) attachPTY(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.ptys(w, r)
	if !ok {
		return
	}
	if !websocket.IsWebSocketUpgrade(r) {
		s.error(w, r, errorf(airlock.EINVALID, "websocket-required", "this route is a WebSocket: send a GET with Upgrade: websocket"))
		return
	}
	// Attach first, so that a refusal is a problem answer, not a
	// WebSocket that closes at once.
	a, err := svc.AttachPTY(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), r.PathValue("pty_id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	up := websocket.Upgrader{
		Subprotocols: []string{PTYSubprotocol},
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			s.error(w, r, errorf(airlock.EINVALID, "websocket-handshake", "%s", reason.Error()))
		},
	}
	conn, err := up.Upgrade(hijackable{w}, r, nil)
	if err != nil {
		a.Detach()
		return // answered by Error
	}
	conn.NetConn().SetDeadline(time.Time{}) // the server's request deadlines no longer apply
	servePTY(conn, a)
}

// servePTY pumps a terminal's output to the WebSocket and the client's
// frames to the terminal, until either ends.
func servePTY(conn *websocket.Conn, a airlock.PTYAttachment) {
	defer conn.Close()
	defer a.Detach()
	conn.SetReadLimit(ptyReadLimit)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			typ, b, err := conn.ReadMessage()
			if err != nil {
				return
			}
			switch typ {
			case websocket.BinaryMessage:
				if err := a.Input(b); err != nil {
					return
				}
			case websocket.TextMessage:
				var m ptyMessage
				dec := json.NewDecoder(strings.NewReader(string(b)))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&m); err != nil || len(m.Resize) != 2 {
					closeWith(conn, closeBadFrame, `a text frame must be {"resize": [cols, rows]}`)
					return
				}
				if err := a.Resize(m.Resize[0], m.Resize[1]); err != nil {
					closeWith(conn, closeBadFrame, cut(err.Error(), 120))
					return
				}
			}
		}
	}()
	ping := time.NewTicker(ptyPingInterval)
	defer ping.Stop()
	out := a.Output()
	for {
		select {
		case b, ok := <-out:
			if !ok {
				select {
				case <-a.Done():
					st, err := a.Exit()
					if err != nil {
						closeWith(conn, closeEnded, "ended: the session or the server ended")
					} else {
						closeWith(conn, closeExited, fmt.Sprintf("exit %d", st.Code))
					}
				default:
					closeWith(conn, closeTooSlow, "too slow: attach again for the scrollback")
				}
				waitClosed(readerDone)
				return
			}
			conn.SetWriteDeadline(time.Now().Add(ptyWriteTimeout))
			if err := conn.WriteMessage(websocket.BinaryMessage, b); err != nil {
				return
			}
		case <-ping.C:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(ptyWriteTimeout)); err != nil {
				return
			}
		case <-readerDone:
			return // the client closed or sent what ends it
		}
	}
}

// closeWith sends a close frame.
func closeWith(conn *websocket.Conn, code int, reason string) {
	conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(ptyWriteTimeout))
}

// waitClosed gives the client a moment to answer a close frame.
func waitClosed(readerDone <-chan struct{}) {
	select {
	case <-readerDone:
	case <-time.After(2 * time.Second):
	}
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// hijackable exposes the Hijacker of the ResponseWriter beneath the
// middleware's wrappers (they Unwrap).
type hijackable struct{ http.ResponseWriter }

func (h hijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(h.ResponseWriter).Hijack()
}

// ptyKeyFromSubprotocol returns the key a browser offers as the
// subprotocol "bearer.<key>" on a WebSocket upgrade, or "".
func ptyKeyFromSubprotocol(r *http.Request) string {
	if !websocket.IsWebSocketUpgrade(r) {
		return ""
	}
	for _, p := range websocket.Subprotocols(r) {
		if key, ok := strings.CutPrefix(p, ptyBearerPrefix); ok {
			return key
		}
	}
	return ""
}
