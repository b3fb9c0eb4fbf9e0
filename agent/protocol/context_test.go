package protocol_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
)

var pngB64 = base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nrest"))

func TestDecodeCellResult(t *testing.T) {
	long := strings.Repeat("é", protocol.MaxCellValueBytes)
	tests := []struct {
		name    string
		in      string
		ok      bool
		outputs int
		dropped int
	}{
		{"empty", `{}`, true, 0, 0},
		{"full", `{"value":"42","error":{"name":"E","value":"v","traceback":"t"},"outputs":[{"type":"image/png","data":"` + pngB64 + `"},{"type":"text/html","data":"<b>"}],"timed_out":true,"duration_ms":5}`, true, 2, 0},
		{"bad outputs dropped", `{"outputs":[{"type":"image/png","data":"not base64"},{"type":"image/png","data":"aGVsbG8="},{"type":"application/x-evil","data":"x"}]}`, true, 0, 3},
		{"unknown field", `{"value":"1","extra":true}`, false, 0, 0},
		{"trailing", `{} {}`, false, 0, 0},
		{"negative", `{"duration_ms":-1}`, false, 0, 0},
		{"long value cut", `{"value":"` + long + `"}`, true, 0, 0},
		{"not JSON", `value`, false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := protocol.DecodeCellResult([]byte(tt.in))
			if (err == nil) != tt.ok {
				t.Fatalf("err %v, want ok %v", err, tt.ok)
			}
			if err != nil {
				return
			}
			if len(r.Outputs) != tt.outputs || r.Dropped != tt.dropped || len(r.Value) > protocol.MaxCellValueBytes {
				t.Fatalf("%+v", r)
			}
		})
	}
	if _, err := protocol.DecodeCellResult(make([]byte, protocol.MaxCellResultBytes+1)); err == nil {
		t.Error("oversized result decoded")
	}
}

// FuzzDecodeCellResult feeds arbitrary agent output to the host's cell
// result decoder: it never panics, and what it accepts is within the
// bounds and encodes and decodes again to the same result.
func FuzzDecodeCellResult(f *testing.F) {
	for _, s := range []string{`{}`, `{"value":"1","outputs":[{"type":"image/png","data":"` + pngB64 + `"}],"dropped":2}`,
		`{"error":{"name":"KeyboardInterrupt","value":"","traceback":"x"},"died":true,"timed_out":true}`,
		`{"outputs":[{"type":"text/html","data":"<table>"},{"type":"x","data":""}]}`, `{"value":"\u00e9\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := protocol.DecodeCellResult(b)
		if err != nil {
			return
		}
		if len(r.Value) > protocol.MaxCellValueBytes || len(r.Outputs) > protocol.MaxCellOutputs || r.Dropped < 0 || r.DurationMS < 0 {
			t.Fatalf("out of bounds: %+v", r)
		}
		if r.Error != nil && (len(r.Error.Name) > protocol.MaxCellErrorBytes || len(r.Error.Traceback) > protocol.MaxCellErrorBytes) {
			t.Fatal("error out of bounds")
		}
		for _, o := range r.Outputs {
			if o.Type == "image/png" {
				png, err := base64.StdEncoding.DecodeString(o.Data)
				if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
					t.Fatal("accepted a bad PNG")
				}
			} else if o.Type != "text/html" && o.Type != "text/plain" {
				t.Fatalf("accepted type %q", o.Type)
			}
		}
		again, err := protocol.EncodeCellResult(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := protocol.DecodeCellResult(again)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if again2, _ := protocol.EncodeCellResult(r2); !bytes.Equal(again, again2) {
			t.Fatalf("not stable:\n%s\n%s", again, again2)
		}
	})
}

func TestContextRequestValidate(t *testing.T) {
	for _, tt := range []struct {
		req protocol.Request
		ok  bool
	}{
		{protocol.Request{Op: protocol.OpContextCreate, Context: &protocol.ContextRequest{ID: "c1", Language: "python"}}, true},
		{protocol.Request{Op: protocol.OpContextCreate, Context: &protocol.ContextRequest{ID: "c1", Language: "ruby"}}, false},
		{protocol.Request{Op: protocol.OpContextRun, Context: &protocol.ContextRequest{ID: "c1", Code: "1"}}, true},
		{protocol.Request{Op: protocol.OpContextRun, Context: &protocol.ContextRequest{ID: "../x"}}, false},
		{protocol.Request{Op: protocol.OpContextRun}, false},
		{protocol.Request{Op: protocol.OpContextRun, Context: &protocol.ContextRequest{ID: "c1", TimeoutMS: -1}}, false},
		{protocol.Request{Op: protocol.OpContextCreate, Context: &protocol.ContextRequest{ID: "c1", Language: "node", Env: []string{"=x"}}}, false},
		{protocol.Request{Op: protocol.OpExec, Exec: &protocol.ExecRequest{Argv: []string{"x"}, MemoryLimitBytes: -1}}, false},
	} {
		if err := tt.req.Validate(); (err == nil) != tt.ok {
			t.Errorf("%+v: %v", tt.req, err)
		}
	}
}

func TestClientListContexts(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	type got struct {
		cs  []protocol.ContextInfo
		err error
	}
	list := func(payload string) got {
		ch := make(chan got, 1)
		go func() {
			cs, err := c.ListContexts(context.Background())
			ch <- got{cs, err}
		}()
		id, req := a.expectRequest()
		if req.Op != protocol.OpContextList {
			t.Fatalf("request %+v", req)
		}
		a.send(protocol.Frame{Type: protocol.TResponse, Stream: id, Payload: []byte(payload)})
		select {
		case g := <-ch:
			return g
		case <-time.After(5 * time.Second):
			t.Fatal("ListContexts hung")
		}
		return got{}
	}
	g := list(`{"contexts":[{"id":"py","language":"python","state":"idle","created_at_ms":5,"runs":2}]}`)
	if g.err != nil || len(g.cs) != 1 || g.cs[0] != (protocol.ContextInfo{ID: "py", Language: "python", State: "idle", CreatedAtMS: 5, Runs: 2}) {
		t.Fatalf("%+v, %v", g.cs, g.err)
	}
	for _, bad := range []string{`{"contexts":[{"id":"../x","language":"python","state":"idle"}]}`, `{"contexts":[{"id":"a","language":"python","state":"on fire"}]}`} {
		if g := list(bad); g.err == nil {
			t.Errorf("%s accepted: %+v", bad, g.cs)
		}
	}
	checkHealthy(t, c, a)
}
