package mcp

import (
	"io"
	"net/http"
	"strconv"
	"sync"
)

// Loopback is an http.RoundTripper that serves every request with a
// handler in this process, instead of over a network: /mcp hands its tool
// calls to the REST API's own handler this way, so they take exactly the
// path a request from outside takes (authentication, limits, problems,
// records) without a socket, and whatever address airlockd listens on.
//
// The response streams: its body is a pipe the handler writes into, and
// RoundTrip returns as soon as the handler has sent its headers (or
// returned). Closing the body early makes the handler's writes fail; the
// request's context is the handler's. A handler that aborts the response
// (panics with http.ErrAbortHandler, as a cut stream does) or panics
// otherwise ends the body with io.ErrUnexpectedEOF.
type Loopback struct {
	Handler http.Handler
}

// RoundTrip serves req with the handler.
func (l Loopback) RoundTrip(req *http.Request) (*http.Response, error) {
	in := req.Clone(req.Context())
	in.RequestURI = req.URL.RequestURI()
	if in.Host == "" {
		in.Host = req.URL.Host
	}
	if in.RemoteAddr == "" {
		in.RemoteAddr = "127.0.0.1:0"
	}
	if in.Body == nil {
		in.Body = http.NoBody
	}
	if in.Proto == "" {
		in.Proto, in.ProtoMajor, in.ProtoMinor = "HTTP/1.1", 1, 1
	}
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		cut := true // until the handler returns normally
		defer func() {
			recover() // an aborted or failed response: the body ends cut
			w.sendHeader(http.StatusOK)
			if cut {
				pw.CloseWithError(io.ErrUnexpectedEOF)
			} else {
				pw.Close()
			}
			if req.Body != nil {
				req.Body.Close()
			}
		}()
		l.Handler.ServeHTTP(w, in)
		cut = false
	}()
	<-w.ready
	length := int64(-1)
	if n, err := strconv.ParseInt(w.sent.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
		length = n
	}
	return &http.Response{
		Status:        http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          pr,
		ContentLength: length,
		Request:       req,
	}, nil
}

// pipeResponse is the handler's side of a Loopback response.
type pipeResponse struct {
	header http.Header
	body   *io.PipeWriter
	ready  chan struct{}

	once   sync.Once
	status int
	sent   http.Header // the header as it was when the status was sent
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) sendHeader(code int) {
	w.once.Do(func() {
		w.status = code
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponse) WriteHeader(code int) {
	if code < 200 { // informational: not a response of its own here
		return
	}
	w.sendHeader(code)
}

func (w *pipeResponse) Write(p []byte) (int, error) {
	w.sendHeader(http.StatusOK)
	return w.body.Write(p)
}

// FlushError is a no-op: every write reaches the reader at once.
func (w *pipeResponse) FlushError() error { return nil }

// Flush is a no-op, for http.Flusher.
func (w *pipeResponse) Flush() {}
