package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/internal/testenv/s3test"
)

// TestAirlockdObjectStoreAndTracing runs the real airlockd with its
// artifacts in a real S3-compatible server (versitygw on loopback), a
// signing key given by file (as every node of a fleet is given the same
// one) and traces exported to a real OTLP/HTTP receiver in the test. A
// Python run that draws a chart must leave the chart in the bucket (and
// nothing in the state directory's blobs/), its signed URL must download
// it and be the one the shared key signs, and the run's record and spans
// must be in the trace of the traceparent the request carried.
func TestAirlockdObjectStoreAndTracing(t *testing.T) {
	n := newTestNode(t, nodeOptions{name: "objstore", images: []string{"python-ds"}})
	tmp, parent, bin, runsc := n.dir, n.parent, n.bin, n.runsc
	srv := s3test.Start(t)
	otlp := newOTLPReceiver(t)
	signingKey := make([]byte, 32)
	rand.Read(signingKey)
	keyFile := filepath.Join(tmp, "fleet-signing.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(signingKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := n.args("--pool-max", "0", "--warm", "", "--warm-sessions", "", "--no-snapshots",
		"--blobs", srv.BucketURL("prefix=node-a/"), "--signing-key-file", keyFile,
		"--otlp-endpoint", otlp.srv.URL, "--node-id", "node-a")
	d := n.track(startDaemonEnv(t, bin, args, srv.Env()))
	if strings.Contains(d.logs(), srv.SecretKey) {
		t.Errorf("airlockd logged the object store's secret key")
	}
	key := n.key()

	const traceID, parentSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code := `import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.savefig("chart.png")
print("drawn")`
	body, _ := json.Marshal(airlock.ExecuteRequest{Language: airlock.Python, Code: code, TimeoutSec: 60})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.url+"/v1/execute", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+traceID+"-"+parentSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /v1/execute: %d %s", resp.StatusCode, raw)
	}
	var e airlock.Execution
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	if e.ExitCode != 0 || e.Stdout != "drawn\n" || len(e.Artifacts) != 1 || e.Artifacts[0].Filename != "chart.png" {
		t.Fatalf("execution: exit %d stdout %q stderr %q artifacts %+v", e.ExitCode, e.Stdout, e.Stderr, e.Artifacts)
	}
	if e.TraceID != traceID {
		t.Errorf("execution trace_id %q, want the request's %s", e.TraceID, traceID)
	}
	a := e.Artifacts[0]

	// The chart is in the bucket under the prefix, and not on local disk.
	out, err := srv.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(srv.Bucket),
		Key: aws.String("node-a/artifacts/" + e.TenantID + "/" + e.ID + "/" + a.ID)})
	if err != nil {
		t.Fatalf("the chart is not in the bucket: %v", err)
	}
	inBucket, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if int64(len(inBucket)) != a.SizeBytes || len(inBucket) < 8 || string(inBucket[1:4]) != "PNG" {
		t.Errorf("object in the bucket: %d bytes (%q...), want the %d-byte PNG", len(inBucket), inBucket[:min(8, len(inBucket))], a.SizeBytes)
	}
	if local, _ := filepath.Glob(filepath.Join(tmp, "blobs", "blobs", "artifacts", "*", "*", "*")); len(local) != 0 {
		t.Errorf("artifact bytes on local disk too: %v", local)
	}

	// The signed URL downloads it without a key, and is exactly what the
	// shared key signs: any node given the key makes and accepts it.
	u, err := url.Parse(a.URL)
	if err != nil {
		t.Fatal(err)
	}
	got := send(t, "GET", a.URL, "", nil)
	if got.status != 200 || string(got.body) != string(inBucket) {
		t.Errorf("GET the signed URL: %d, %d bytes; want 200 with the object's %d", got.status, len(got.body), len(inBucket))
	}
	exp, _ := strconv.ParseInt(u.Query().Get("expires"), 10, 64)
	base := u.Scheme + "://" + u.Host
	if want := rest.SignArtifactURL([]byte(hex.EncodeToString(signingKey)), base, e.TenantID, u.Query().Get("key"), a.ID, time.Unix(exp, 0)); a.URL != want {
		t.Errorf("artifact URL %s is not the one the shared key signs (%s)", a.URL, want)
	}
	tampered := strings.Replace(a.URL, "token=", "token=00", 1)
	if r := send(t, "GET", tampered, "", nil); r.status == 200 {
		t.Errorf("a tampered token downloaded the artifact")
	}

	// The API's request log carries the trace of the request.
	if !regexpMatch(`msg="http request".*path=/v1/execute .*trace_id=`+traceID, d.logs()) {
		t.Errorf("no request log line of POST /v1/execute with trace_id=%s:\n%s", traceID, d.logs())
	}

	// Stop (which flushes the spans), then look at the trace.
	d.stop(t)
	spans := otlp.inTrace(traceID)
	names := map[string][]*tracepb.Span{}
	for _, s := range spans {
		names[s.Name] = append(names[s.Name], s)
	}
	recv := names["receive"]
	if len(recv) != 1 || hex.EncodeToString(recv[0].ParentSpanId) != parentSpan {
		t.Fatalf("receive spans in the trace: %d (want 1, child of the caller's span); spans %v", len(recv), spanNames(spans))
	}
	for _, n := range []string{"place", "acquire", "run", "collect"} {
		if len(names[n]) != 1 {
			t.Errorf("%d %q spans in the trace, want 1 (spans: %v)", len(names[n]), n, spanNames(spans))
			continue
		}
		if p := hex.EncodeToString(names[n][0].ParentSpanId); p != hex.EncodeToString(recv[0].SpanId) {
			t.Errorf("span %s has parent %s, want the receive span %x", n, p, recv[0].SpanId)
		}
	}
	if after := observe(t, runsc, tmp, parent, 0); !after.empty() {
		t.Errorf("left after a clean stop: %s", after)
	}
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

func spanNames(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// otlpReceiver is a real OTLP/HTTP trace receiver on loopback.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	o := &otlpReceiver{}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		o.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				o.spans = append(o.spans, ss.Spans...)
			}
		}
		o.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *otlpReceiver) inTrace(traceID string) []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range o.spans {
		if hex.EncodeToString(s.TraceId) == traceID {
			out = append(out, s)
		}
	}
	return out
}
