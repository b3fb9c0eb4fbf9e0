package e2b

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// Fuzz targets for every parser of untrusted input: Connect envelopes
// and messages, multipart and raw uploads, the control plane's and the
// interpreter's JSON, paths, users and the metadata filter. Each checks
// that the answer is well formed in the shape its SDK reads, and that
// nothing panics (panicLog). The seeds run in every go test.

// checkReply checks an answer's body against its Content-Type.
func checkReply(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	body := rec.Body.Bytes()
	ct := rec.Header().Get("Content-Type")
	switch {
	case rec.Code == http.StatusNoContent:
	case strings.HasPrefix(ct, "application/connect+json"):
		ended := false
		for len(body) > 0 {
			if len(body) < 5 || ended {
				t.Fatalf("bad envelope stream: %q", rec.Body.Bytes())
			}
			n := binary.BigEndian.Uint32(body[1:5])
			if uint32(len(body)-5) < n || !json.Valid(body[5:5+n]) {
				t.Fatalf("bad envelope: %q", body)
			}
			ended = body[0]&2 != 0
			body = body[5+n:]
		}
		if !ended {
			t.Fatalf("stream without an end: %q", rec.Body.Bytes())
		}
	case strings.HasPrefix(ct, "application/x-ndjson"):
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			if !json.Valid(sc.Bytes()) {
				t.Fatalf("bad NDJSON line %q", sc.Bytes())
			}
		}
	case strings.HasPrefix(ct, "application/json"):
		if !json.Valid(body) {
			t.Fatalf("%d: invalid JSON %q", rec.Code, body)
		}
		if rec.Code >= 400 {
			var e struct {
				Code    any    `json:"code"`
				Message string `json:"message"`
			}
			if json.Unmarshal(body, &e) != nil || e.Code == nil {
				t.Fatalf("%d: error without a code: %q", rec.Code, body)
			}
		}
	case rec.Code == http.StatusOK && ct == "application/octet-stream":
	case strings.HasPrefix(ct, "application/proto"), strings.HasPrefix(ct, "application/connect+proto"), strings.HasPrefix(ct, "application/grpc"):
		// connect-go's own answers to the binary codec and other protocols.
	case rec.Code == http.StatusUnsupportedMediaType || rec.Code == http.StatusNotFound || rec.Code == http.StatusMethodNotAllowed:
		// connect-go's answers to an unknown content type or procedure.
	default:
		t.Fatalf("%d with Content-Type %q: %q", rec.Code, ct, body)
	}
}

func serve(s *Server, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	s.Wrap(http.NotFoundHandler()).ServeHTTP(rec, req)
	return rec
}

func sandboxHeaders(s *Server, req *http.Request, port string) {
	req.Header.Set(headerSandboxID, "sbx")
	req.Header.Set(headerSandboxPort, port)
	req.Header.Set(headerAccessToken, s.token(purposeEnvd, "sbx", fakeKeyID))
	req.Header.Set(headerTrafficToken, s.token(purposeTraffic, "sbx", fakeKeyID))
}

var procedures = []string{
	"/process.Process/Start", "/process.Process/Connect", "/process.Process/List", "/process.Process/SendInput",
	"/process.Process/SendSignal", "/process.Process/CloseStdin", "/process.Process/Update",
	"/filesystem.Filesystem/Stat", "/filesystem.Filesystem/ListDir", "/filesystem.Filesystem/MakeDir",
	"/filesystem.Filesystem/Move", "/filesystem.Filesystem/Remove", "/filesystem.Filesystem/WatchDir",
}

var contentTypes = []string{"application/connect+json", "application/json", "application/connect+proto", "application/proto", "text/plain", ""}

func FuzzConnect(f *testing.F) {
	env := func(flags byte, s string) []byte {
		b := []byte{flags, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[1:], uint32(len(s)))
		return append(b, s...)
	}
	f.Add(uint8(0), uint8(0), env(0, `{"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi"],"envs":{"A":"1"},"cwd":"/home/user"},"stdin":false}`), "")
	f.Add(uint8(1), uint8(0), env(0, `{"process":{"pid":42}}`), "")
	f.Add(uint8(7), uint8(1), []byte(`{"path":"/home/user"}`), "Basic dXNlcjo=")
	f.Add(uint8(8), uint8(1), []byte(`{"path":"a/b","depth":40}`), "")
	f.Add(uint8(9), uint8(1), []byte(`{"path":"../../etc"}`), "Basic cm9vdDo=")
	f.Add(uint8(10), uint8(1), []byte(`{"source":"a","destination":"/tmp/b"}`), "")
	f.Add(uint8(3), uint8(1), []byte(`{"process":{"pid":42},"input":{"stdin":"aGk="}}`), "")
	f.Add(uint8(4), uint8(1), []byte(`{"process":{"tag":"x"},"signal":"SIGNAL_SIGTERM"}`), "")
	f.Add(uint8(0), uint8(0), env(0, `{"process":{"cmd":"x"},"pty":{"size":{"cols":1,"rows":1}}}`), "Basic !!")
	f.Add(uint8(0), uint8(0), []byte{0, 255, 255, 255, 255, '{'}, "")
	f.Add(uint8(12), uint8(0), env(1, `{}`), "")
	f.Fuzz(func(t *testing.T, proc, ct uint8, body []byte, auth string) {
		s, _ := fakeServer(t)
		req := httptest.NewRequest("POST", procedures[int(proc)%len(procedures)], bytes.NewReader(body))
		sandboxHeaders(s, req, portEnvd)
		req.Header.Set("Content-Type", contentTypes[int(ct)%len(contentTypes)])
		req.Header.Set("Connect-Protocol-Version", "1")
		req.Header.Set("Connect-Timeout-Ms", "5000")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		checkReply(t, serve(s, req))
	})
}

func FuzzUpload(f *testing.F) {
	f.Add("", "multipart/form-data; boundary=B", "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a/b.txt\"\r\n\r\nhello\r\n--B--\r\n")
	f.Add("", "multipart/form-data; boundary=B", "--B\r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''%2Fhome%2Fuser%2Fx\r\n\r\nx\r\n--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/y\"\r\n\r\ny\r\n--B--\r\n")
	f.Add("a.txt", "application/octet-stream", "raw")
	f.Add("../../etc/x", "application/octet-stream", "raw")
	f.Add("a", "multipart/form-data; boundary=B", "--B\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nx\r\n--B--")
	f.Add("", "multipart/form-data; boundary=\"", "--")
	f.Fuzz(func(t *testing.T, path, ct, body string) {
		s, _ := fakeServer(t)
		u := "/files"
		if path != "" {
			u += "?path=" + strings.ReplaceAll(path, "&", "%26")
		}
		req, err := http.NewRequest("POST", u, strings.NewReader(body))
		if err != nil {
			return
		}
		sandboxHeaders(s, req, portEnvd)
		req.Header.Set("Content-Type", ct)
		checkReply(t, serve(s, req))
		get, err := http.NewRequest("GET", u, nil)
		if err != nil {
			return
		}
		sandboxHeaders(s, get, portEnvd)
		checkReply(t, serve(s, get))
	})
}

func FuzzControl(f *testing.F) {
	f.Add("POST", "/v2/sandboxes", `{"templateID":"base","timeout":300,"metadata":{"a":"b"},"envVars":{"X":"1"},"network":{"allowOut":["pypi.org"],"denyOut":["0.0.0.0/0"]}}`)
	f.Add("POST", "/sandboxes", `{"templateID":"code-interpreter-v1","secure":true,"allow_internet_access":true,"metadata":{},"envVars":{}}`)
	f.Add("GET", "/v2/sandboxes?metadata=a%3Db&state=running,paused&limit=5&nextToken=x", "")
	f.Add("POST", "/sandboxes/sbx/timeout", `{"timeout":-5}`)
	f.Add("POST", "/v2/sandboxes/sbx/connect", `{"timeout":99999999999}`)
	f.Add("PUT", "/sandboxes/sbx/network", `{"allowOut":["*.example.com:443"],"allow_internet_access":false}`)
	f.Add("DELETE", "/sandboxes/sbx", "")
	f.Add("GET", "/sandboxes/sbx", "")
	f.Fuzz(func(t *testing.T, method, path, body string) {
		s, _ := fakeServer(t)
		req, err := http.NewRequest(method, "http://x"+path, strings.NewReader(body))
		if err != nil || !controlPlanePath(req.URL.Path) {
			return
		}
		req.Header.Set(headerAPIKey, "key")
		checkReply(t, serve(s, req))
	})
}

func FuzzExecute(f *testing.F) {
	f.Add("/execute", `{"code":"print(1)"}`)
	f.Add("/execute", `{"code":"1+1","language":"js","context_id":null,"env_vars":null}`)
	f.Add("/execute", `{"code":"x","context_id":"ctx-python"}`)
	f.Add("/contexts", `{"language":"python","cwd":"/home/user/sub"}`)
	f.Add("/contexts", `{"language":"r"}`)
	f.Add("/contexts/ctx-python/restart", ``)
	f.Fuzz(func(t *testing.T, path, body string) {
		s, _ := fakeServer(t)
		req, err := http.NewRequest("POST", "http://x"+path, strings.NewReader(body))
		if err != nil {
			return
		}
		sandboxHeaders(s, req, portInterpreter)
		checkReply(t, serve(s, req))
	})
}

func FuzzPaths(f *testing.F) {
	for _, p := range []string{"", "~", "~/x", "a/b", "/home/user/../x", "/workspace/a", "/tmp", "/tmp/../etc", "/home/userx", "..", "a\x00b"} {
		f.Add(p, "Basic dXNlcjo=", "a%3Db%26c%3D%25")
	}
	f.Fuzz(func(t *testing.T, p, auth, meta string) {
		if q, err := toSandbox(p); err == nil {
			if !(q == workspace || strings.HasPrefix(q, workspace+"/") || q == "/tmp" || strings.HasPrefix(q, "/tmp/")) {
				t.Fatalf("toSandbox(%q) = %q, outside the roots", p, q)
			}
			for _, seg := range strings.Split(q, "/") {
				if seg == ".." || seg == "." {
					t.Fatalf("toSandbox(%q) = %q, not clean", p, q)
				}
			}
			if back, err := toSandbox(fromSandbox(q)); err != nil || back != q {
				t.Fatalf("round trip of %q: %q, %v", q, back, err)
			}
		}
		if u, err := basicUser(auth); err == nil && u != "" && u != "user" && u != "root" {
			t.Fatalf("basicUser(%q) accepted %q", auth, u)
		}
		parseMetadataQuery([]string{meta})
		var ts textStream
		var out string
		for i := 0; i < len(p); i += 3 {
			out += ts.text([]byte(p[i:min(i+3, len(p))]))
		}
		out += ts.flush()
		if out != p {
			t.Fatalf("textStream changed %q to %q", p, out)
		}
		if utf8.ValidString(p) {
			var ts textStream
			for i := 0; i < len(p); i++ {
				if s := ts.text([]byte{p[i]}); !utf8.ValidString(s) {
					t.Fatalf("textStream split a sequence of %q: %q", p, s)
				}
			}
		}
	})
}
