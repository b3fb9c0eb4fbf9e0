package broker

import (
	"net/http"
	"net/http/httptest"

	"github.com/airlockhq/airlock"
)

// ServeTest makes the call r stands for, as the egress proxy does, and
// returns the answer the sandbox would get.
func ServeTest(b *Broker, r *http.Request, c airlock.BrokerCaller) *httptest.ResponseRecorder {
	call := &airlock.BrokerCall{
		Caller: c, Method: r.Method, Path: r.URL.Path, EscapedPath: r.URL.EscapedPath(),
		RawQuery: r.URL.RawQuery, Header: r.Header, ContentLength: r.ContentLength,
	}
	if r.Body != nil && r.Body != http.NoBody {
		call.Body = r.Body
	}
	w := httptest.NewRecorder()
	b.Call(r.Context(), call, recorderReply{w})
	return w
}

type recorderReply struct{ w *httptest.ResponseRecorder }

func (r recorderReply) Start(status int, header map[string][]string) {
	for k, vs := range header {
		r.w.Header()[k] = vs
	}
	r.w.WriteHeader(status)
}

func (r recorderReply) Write(b []byte) (int, error) { return r.w.Write(b) }
