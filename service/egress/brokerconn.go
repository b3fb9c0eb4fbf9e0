package egress

import (
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// serveBroker serves HTTP from the sandbox to the broker on the
// connection itself: every request on it (keep-alive included) goes to the
// broker with the caller the node knows, never one the request claims.
func (s *Service) serveBroker(a *attachment, c *net.TCPConn, head []byte, ev *airlock.EgressEvent, start time.Time) {
	pc := &proxyConn{a: a, client: c, name: airlock.BrokerHost, port: ev.Port, proto: ProtoHTTP, broker: true}
	if !a.addConn(pc) {
		reset(c)
		return
	}
	defer a.removeConn(pc)
	conn := &countingConn{TCPConn: c, r: io.MultiReader(bytes.NewReader(head), c), pc: pc}
	caller := airlock.BrokerCaller{
		TenantID:    a.req.TenantID,
		SessionID:   a.req.SessionID,
		ExecutionID: a.req.ExecutionID,
		Scopes:      append([]string(nil), a.req.BrokerScopes...),
	}
	ln := &oneConnListener{conn: conn, done: make(chan struct{})}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if name, _, err := splitHost(r.Host); err != nil || name != airlock.BrokerHost {
				http.Error(w, "requests on a broker connection must be for "+airlock.BrokerHost, http.StatusForbidden)
				return
			}
			s.cfg.Broker.Call(r.Context(), brokerCall(r, caller), httpReply{w})
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				ln.Close()
			}
		},
	}
	srv.Serve(ln)
	c.Close()
	ev.BytesUp, ev.BytesDown = pc.up.Load(), pc.down.Load()
	ev.DurationMS = time.Since(start).Milliseconds()
	ev.Verdict, ev.Reason = airlock.VerdictAllowed, "broker"
	if r := pc.cutReason(); r != "" {
		ev.Verdict, ev.Reason = airlock.VerdictClosed, r
	}
	s.Record(ev)
}

// brokerCall is the broker's view of an HTTP request from the sandbox.
func brokerCall(r *http.Request, caller airlock.BrokerCaller) *airlock.BrokerCall {
	call := &airlock.BrokerCall{
		Caller:        caller,
		Method:        r.Method,
		Path:          r.URL.Path,
		EscapedPath:   r.URL.EscapedPath(),
		RawQuery:      r.URL.RawQuery,
		Header:        r.Header,
		ContentLength: r.ContentLength,
	}
	if r.Body != nil && r.Body != http.NoBody {
		call.Body = r.Body
	}
	return call
}

// httpReply writes the broker's answer as the HTTP response, each part of
// the body sent on at once.
type httpReply struct{ w http.ResponseWriter }

func (r httpReply) Start(status int, header map[string][]string) {
	h := r.w.Header()
	for k, vs := range header {
		h[k] = vs
	}
	r.w.WriteHeader(status)
}

func (r httpReply) Write(b []byte) (int, error) {
	n, err := r.w.Write(b)
	if f, ok := r.w.(http.Flusher); ok {
		f.Flush()
	}
	return n, err
}

// countingConn replays the sniffed head, then reads the connection, and
// counts and charges both directions.
type countingConn struct {
	*net.TCPConn
	r  io.Reader
	pc *proxyConn
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.pc.up.Add(int64(n))
	if !c.pc.a.charge(int64(n)) {
		c.pc.cut("quota-exceeded")
		return n, errQuota
	}
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.TCPConn.Write(b)
	c.pc.down.Add(int64(n))
	if !c.pc.a.charge(int64(n)) {
		c.pc.cut("quota-exceeded")
		return n, errQuota
	}
	return n, err
}

// oneConnListener hands out one connection, then blocks until closed.
type oneConnListener struct {
	mu   sync.Mutex
	conn net.Conn
	once sync.Once
	done chan struct{}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.conn
	l.conn = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return &net.TCPAddr{} }
