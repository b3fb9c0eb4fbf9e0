package tracing_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/tracing"
)

// receiver is a real OTLP/HTTP trace receiver on loopback: it decodes
// each export request's protobuf body and keeps the spans.
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	// spans by name; resources' service.name beside them
	spans    []*tracepb.Span
	services []string
	bad      []string
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			rc.fail("unexpected request " + r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type"))
			http.Error(w, "no", http.StatusBadRequest)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				rc.fail("gzip: " + err.Error())
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			rc.fail("read: " + err.Error())
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			rc.fail("decode: " + err.Error())
			http.Error(w, "bad protobuf", http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.ResourceSpans {
			svc := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					svc = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					rc.spans = append(rc.spans, s)
					rc.services = append(rc.services, svc)
				}
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) fail(s string) {
	rc.mu.Lock()
	rc.bad = append(rc.bad, s)
	rc.mu.Unlock()
}

func (rc *receiver) byName() map[string][]*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	m := map[string][]*tracepb.Span{}
	for _, s := range rc.spans {
		m[s.Name] = append(m[s.Name], s)
	}
	return m
}

func resetGlobal(t *testing.T) {
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		endpoint string
		ok       bool
	}{
		{"", true},
		{"http://127.0.0.1:4318", true},
		{"https://otel.example.com/v1/traces", true},
		{"127.0.0.1:4318", false},
		{"grpc://127.0.0.1:4317", false},
		{"http://", false},
		{"http://u:p@127.0.0.1:4318", false},
		{"http://127.0.0.1:4318/?x=1", false},
		{"http://%zz", false},
	} {
		if err := (tracing.Config{Endpoint: tt.endpoint}).Validate(); (err == nil) != tt.ok {
			t.Errorf("Validate(%q) = %v, want ok=%v", tt.endpoint, err, tt.ok)
		}
	}
}

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

// TestSpansAcrossNodes sends a request with a traceparent to a "front"
// node that places and forwards it through tracing.Transport to a "back"
// node that acquires, runs and collects; the receiver must get every
// span, in one trace (the caller's), each with the right parent.
func TestSpansAcrossNodes(t *testing.T) {
	resetGlobal(t)
	rc := newReceiver(t)
	ctx := context.Background()
	p, err := tracing.Setup(ctx, tracing.Config{Endpoint: rc.srv.URL, Node: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	if !p.Enabled() {
		t.Fatal("provider with an endpoint is not enabled")
	}

	var logs bytes.Buffer
	logger := slog.New(tracing.LogHandler(slog.NewTextHandler(&logs, nil)))

	back := httptest.NewServer(tracing.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		for _, name := range []string{tracing.SpanAcquire, tracing.SpanRun, tracing.SpanCollect} {
			_, span := tracing.Start(ctx, name)
			span.End()
		}
		logger.InfoContext(ctx, "ran on the back node")
		w.Header().Set("X-Trace", tracing.TraceID(ctx))
		io.WriteString(w, strings.Repeat("streamed ", 1000))
	})))
	t.Cleanup(back.Close)
	client := &http.Client{Transport: &tracing.Transport{Node: "node-b"}}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/execute", func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		_, span := tracing.StartPlace(ctx)
		tracing.SetNode(span, "node-b")
		span.End()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, back.URL+"/v1/execute", nil)
		req.Header.Set("Traceparent", "00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01") // replaced by the transport
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("X-Back-Trace", resp.Header.Get("X-Trace"))
		io.Copy(w, resp.Body)
	})
	front := httptest.NewServer(tracing.Middleware(mux))
	t.Cleanup(front.Close)

	req, _ := http.NewRequest(http.MethodPost, front.URL+"/v1/execute", nil)
	req.Header.Set("Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(body) != 9000 {
		t.Fatalf("status %d, %d bytes", resp.StatusCode, len(body))
	}
	if got := resp.Header.Get("X-Back-Trace"); got != callerTrace {
		t.Errorf("the back node's trace ID is %q, want the caller's %s", got, callerTrace)
	}
	if !strings.Contains(logs.String(), "trace_id="+callerTrace) || !strings.Contains(logs.String(), "span_id=") {
		t.Errorf("the log record lacks trace_id/span_id: %s", logs.String())
	}

	want := []string{tracing.SpanReceive, tracing.SpanPlace, tracing.SpanForward, tracing.SpanAcquire, tracing.SpanRun, tracing.SpanCollect}
	testreq.Eventually(t, 20*time.Second, "the receiver to get every span", func() bool {
		p.ForceFlush(ctx)
		m := rc.byName()
		for _, n := range want {
			if len(m[n]) == 0 || (n == tracing.SpanReceive && len(m[n]) < 2) {
				return false
			}
		}
		return true
	})
	rc.mu.Lock()
	if len(rc.bad) > 0 {
		t.Errorf("receiver saw bad requests: %v", rc.bad)
	}
	for _, svc := range rc.services {
		if svc != "airlockd" {
			t.Errorf("service.name %q, want airlockd", svc)
		}
	}
	rc.mu.Unlock()

	m := rc.byName()
	id := func(b []byte) string { return hex.EncodeToString(b) }
	for name, spans := range m {
		for _, s := range spans {
			if id(s.TraceId) != callerTrace {
				t.Errorf("span %s is in trace %s, want the caller's %s", name, id(s.TraceId), callerTrace)
			}
		}
	}
	// The two receive spans: the front one's parent is the caller's span,
	// the back one's is the forward span.
	forward := m[tracing.SpanForward][0]
	var frontRecv, backRecv *tracepb.Span
	for _, s := range m[tracing.SpanReceive] {
		switch id(s.ParentSpanId) {
		case callerSpan:
			frontRecv = s
		case id(forward.SpanId):
			backRecv = s
		}
	}
	if frontRecv == nil || backRecv == nil {
		t.Fatalf("receive spans do not continue the caller's span and the forward span: %v", m[tracing.SpanReceive])
	}
	if frontRecv.Kind != tracepb.Span_SPAN_KIND_SERVER || forward.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("kinds: receive %v, forward %v", frontRecv.Kind, forward.Kind)
	}
	parents := map[string]*tracepb.Span{
		tracing.SpanPlace:   frontRecv,
		tracing.SpanForward: frontRecv,
		tracing.SpanAcquire: backRecv,
		tracing.SpanRun:     backRecv,
		tracing.SpanCollect: backRecv,
	}
	for name, parent := range parents {
		s := m[name][0]
		if id(s.ParentSpanId) != id(parent.SpanId) {
			t.Errorf("span %s has parent %s, want %s (%s)", name, id(s.ParentSpanId), id(parent.SpanId), parent.Name)
		}
	}
	if got := stringAttr(frontRecv, "http.route"); got != "POST /v1/execute" {
		t.Errorf("receive http.route = %q", got)
	}
	if got := stringAttr(m[tracing.SpanPlace][0], "airlock.node"); got != "node-b" {
		t.Errorf("place airlock.node = %q", got)
	}
	// The forward span ends when the streamed body is read: after the
	// back node's receive span.
	if forward.EndTimeUnixNano < backRecv.EndTimeUnixNano {
		t.Errorf("forward ended before the back node's response ended")
	}
}

func stringAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// TestNoopContinuesTraceparent: with no endpoint nothing is exported,
// yet a traceparent sent in gives the request its trace ID (for the
// logs and the record), and a new request without one has none.
func TestNoopContinuesTraceparent(t *testing.T) {
	resetGlobal(t)
	p, err := tracing.Setup(context.Background(), tracing.Config{})
	if err != nil || p.Enabled() {
		t.Fatalf("Setup without an endpoint: %v, enabled %v", err, p.Enabled())
	}
	otel.SetTracerProvider(noop.NewTracerProvider())
	var seen string
	h := tracing.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = tracing.TraceID(r.Context())
	}))
	for _, tt := range []struct{ header, want string }{
		{"00-" + callerTrace + "-" + callerSpan + "-01", callerTrace},
		{"", ""},
		{"garbage", ""},
		{"00-00000000000000000000000000000000-" + callerSpan + "-01", ""},
	} {
		req := httptest.NewRequest(http.MethodGet, "/x", nil)
		if tt.header != "" {
			req.Header.Set("Traceparent", tt.header)
		}
		seen = "unset"
		h.ServeHTTP(httptest.NewRecorder(), req)
		if seen != tt.want {
			t.Errorf("traceparent %q: trace ID %q, want %q", tt.header, seen, tt.want)
		}
	}
}

// TestMiddlewareKeepsWriter: handlers behind the middleware can still
// flush (directly and through http.ResponseController) and see their
// status.
func TestMiddlewareKeepsWriter(t *testing.T) {
	h := tracing.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Flusher); !ok {
			t.Error("writer is not an http.Flusher")
		}
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "a")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("ResponseController.Flush: %v", err)
		}
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusTeapot || !rec.Flushed || rec.Body.String() != "a" {
		t.Errorf("code %d flushed %v body %q", rec.Code, rec.Flushed, rec.Body.String())
	}
}

// TestTransportDoesNotChangeRequest: the caller's request keeps its
// headers; the sent one carries the traceparent of the forward span.
func TestTransportDoesNotChangeRequest(t *testing.T) {
	resetGlobal(t)
	rc := newReceiver(t)
	p, err := tracing.Setup(context.Background(), tracing.Config{Endpoint: rc.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Traceparent")
	}))
	t.Cleanup(srv.Close)
	ctx, span := tracing.Start(context.Background(), "parent")
	defer span.End()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := (&http.Client{Transport: &tracing.Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.Header.Get("Traceparent") != "" {
		t.Error("the transport changed the caller's request")
	}
	parts := strings.Split(got, "-")
	if len(parts) != 4 || parts[1] != span.SpanContext().TraceID().String() || parts[2] == span.SpanContext().SpanID().String() {
		t.Errorf("sent traceparent %q: want the trace %s with the forward span's ID", got, span.SpanContext().TraceID())
	}
	// A failed round trip ends its span with an error.
	bad, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/", nil)
	if _, err := (&http.Client{Transport: &tracing.Transport{}}).Do(bad); err == nil {
		t.Error("request to a closed port succeeded")
	}
}
