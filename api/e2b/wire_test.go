package e2b_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"mime/multipart"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestWireReplay replays, without any SDK, the wire shapes E2B's SDKs
// send (captured from e2b 2.51.0 and @e2b/code-interpreter 2.8.0) against
// a real node: create on the control plane, the Connect envelope stream
// of Process/Start, unary JSON Filesystem/Stat, multipart and gzip
// uploads to /files, and the NDJSON stream of /execute.
func TestWireReplay(t *testing.T) {
	n := newNode(t)
	s := n.create(t, n.keyA, `{"templateID":"code-interpreter-v1","metadata":{"k":"v"},"envVars":{"FROM_CREATE":"yes"}}`)
	hex64 := regexp.MustCompile(`^[0-9A-Z]{26}\.[0-9a-f]{64}$`) // the key's ID, a dot, the HMAC
	if s.SandboxID == "" || s.TemplateID != "code-interpreter-v1" || s.ClientID == "" || s.EnvdVersion != "0.5.7" ||
		!hex64.MatchString(s.EnvdAccessToken) || !hex64.MatchString(s.TrafficAccessToken) || s.EnvdAccessToken == s.TrafficAccessToken ||
		s.Domain != "airlock.invalid" {
		t.Fatalf("create answered %+v", s)
	}

	// Process/Start: the start event first, then output, then the end.
	status, msgs, end := n.connectStream(t, "/process.Process/Start", s.envd("Connect-Timeout-Ms", "30000", "Keepalive-Ping-Interval", "50"),
		`{"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi; echo $FROM_CREATE $HOME; pwd; echo oops >&2; exit 4"],"envs":{}},"stdin":false}`)
	if status != 200 || string(end) != "{}" {
		t.Fatalf("Start: %d, end %s", status, end)
	}
	type event struct {
		Event struct {
			Start *struct {
				Pid int `json:"pid"`
			} `json:"start"`
			Data *struct {
				Stdout []byte `json:"stdout"`
				Stderr []byte `json:"stderr"`
			} `json:"data"`
			End *struct {
				ExitCode int    `json:"exitCode"`
				Exited   bool   `json:"exited"`
				Status   string `json:"status"`
			} `json:"end"`
		} `json:"event"`
	}
	var evs []event
	for _, m := range msgs {
		var e event
		if err := json.Unmarshal(m, &e); err != nil {
			t.Fatalf("event %s: %v", m, err)
		}
		evs = append(evs, e)
	}
	if len(evs) < 2 || evs[0].Event.Start == nil || evs[0].Event.Start.Pid <= 0 {
		t.Fatalf("first event is not start: %s", msgs)
	}
	last := evs[len(evs)-1].Event.End
	if last == nil || last.ExitCode != 4 || !last.Exited || last.Status != "exit status 4" {
		t.Fatalf("last event: %s", msgs[len(msgs)-1])
	}
	var stdout, stderr bytes.Buffer
	for _, e := range evs[1 : len(evs)-1] {
		if e.Event.Data == nil {
			continue // a keepalive
		}
		stdout.Write(e.Event.Data.Stdout)
		stderr.Write(e.Event.Data.Stderr)
	}
	if stdout.String() != "hi\nyes /home/user\n/home/user\n" || stderr.String() != "oops\n" {
		t.Fatalf("output %q / %q", stdout.String(), stderr.String())
	}

	// Filesystem/Stat, unary JSON.
	r := n.connectUnary(t, "/filesystem.Filesystem/Stat", s.envd(), `{"path":"/home/user"}`)
	var st struct {
		Entry struct {
			Name, Type, Path, Permissions string
			ModifiedTime                  time.Time
		} `json:"entry"`
	}
	r.json(t, &st)
	if r.status != 200 || st.Entry.Name != "user" || st.Entry.Type != "FILE_TYPE_DIRECTORY" || st.Entry.Path != "/home/user" ||
		!strings.HasPrefix(st.Entry.Permissions, "d") || st.Entry.ModifiedTime.IsZero() {
		t.Fatalf("Stat: %d %s", r.status, r.body)
	}

	// A multipart upload of two files, the filename of each part its
	// destination, as the SDK's write([...]) sends it.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for name, content := range map[string]string{"sub/one.txt": "one", "/tmp/two.txt": "two"} {
		fw, _ := mw.CreateFormFile("file", name)
		fw.Write([]byte(content))
	}
	mw.Close()
	r = n.do(t, "POST", "/files", s.envd("Content-Type", mw.FormDataContentType()), &body)
	var written []struct{ Name, Type, Path string }
	r.json(t, &written)
	if r.status != 200 || len(written) != 2 {
		t.Fatalf("multipart upload: %d %s", r.status, r.body)
	}
	for _, w := range written {
		if w.Type != "file" || !(w.Path == "/home/user/sub/one.txt" && w.Name == "one.txt" || w.Path == "/tmp/two.txt" && w.Name == "two.txt") {
			t.Errorf("written %+v", w)
		}
	}
	if r := n.do(t, "GET", "/files?path=sub%2Fone.txt&username=user", s.envd(), nil); r.status != 200 || string(r.body) != "one" {
		t.Fatalf("read back: %d %q", r.status, r.body)
	}
	// A raw gzip body with ?path=, as the SDK sends a stream (envd 0.5.7).
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(strings.Repeat("z", 100000)))
	zw.Close()
	r = n.do(t, "POST", "/files?path=%2Fhome%2Fuser%2Fz.txt", s.envd("Content-Type", "application/octet-stream", "Content-Encoding", "gzip"), &gz)
	if r.status != 200 || !strings.Contains(string(r.body), `"path":"/home/user/z.txt"`) {
		t.Fatalf("gzip upload: %d %s", r.status, r.body)
	}
	if r := n.do(t, "GET", "/files?path=z.txt", s.envd(), nil); r.status != 200 || len(r.body) != 100000 || r.header.Get("Content-Length") != "100000" {
		t.Fatalf("read gzip upload: %d, %d bytes", r.status, len(r.body))
	}

	// /execute streams NDJSON: output lines with timestamps, the main
	// result, the count, the end.
	r = n.do(t, "POST", "/execute", s.interp(), strings.NewReader(`{"code":"print('a')\nprint('b', end='')\nopen('/home/user/sub/one.txt').read() + '!'"}`))
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/x-ndjson") {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	var out []string
	var main map[string]any
	for _, l := range lines {
		switch l["type"] {
		case "stdout":
			out = append(out, l["text"].(string))
			if _, err := time.Parse(time.RFC3339Nano, l["timestamp"].(string)); err != nil {
				t.Errorf("stdout line without a timestamp: %v", l)
			}
		case "result":
			if l["is_main_result"] == true {
				main = l
			}
		}
	}
	if strings.Join(out, "|") != "a\n|b" || main == nil || main["text"] != "'one!'" {
		t.Fatalf("execute lines: %v", lines)
	}
	if l := lines[len(lines)-1]; l["type"] != "end_of_execution" {
		t.Errorf("last line %v", l)
	}
	if l := lines[len(lines)-2]; l["type"] != "number_of_executions" || l["execution_count"] != 1.0 {
		t.Errorf("count line %v", l)
	}

	// An error and a figure.
	r = n.do(t, "POST", "/execute", s.interp(), strings.NewReader(`{"code":"import matplotlib.pyplot as plt\nplt.plot([1,2])\nplt.show()\n1/0","language":"python"}`))
	var sawErr, sawPNG bool
	for _, l := range strings.Split(strings.TrimSpace(string(r.body)), "\n") {
		var m map[string]any
		json.Unmarshal([]byte(l), &m)
		if m["type"] == "error" && m["name"] == "ZeroDivisionError" && strings.Contains(m["traceback"].(string), "ZeroDivisionError") {
			sawErr = true
		}
		if m["type"] == "result" && m["png"] != nil {
			b, _ := base64.StdEncoding.DecodeString(m["png"].(string))
			sawPNG = bytes.HasPrefix(b, []byte("\x89PNG"))
		}
	}
	if !sawErr || !sawPNG {
		t.Fatalf("error %v, png %v: %s", sawErr, sawPNG, clipped(r.body))
	}
}

func clipped(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}
