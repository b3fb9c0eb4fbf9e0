package e2b_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/api/e2b"
	"github.com/airlockhq/airlock/internal/teststack"
)

// An envd upload that trickles (a slow-loris, raw or multipart) is cut
// off after its rate window with a 400 in envd's {code, message} shape,
// and a steady one goes through.
func TestSlowUploadCutOff(t *testing.T) {
	const window = 2 * time.Second
	n := newNodeConfig(t, teststack.Options{NoServer: true}, func(c *e2b.Config) {
		c.UploadMinRate, c.UploadRateWindow = 4<<10, window
	})
	s := n.create(t, n.keyA, `{"templateID":"base"}`)
	for _, c := range []struct{ name, contentType, first string }{
		{"raw", "application/octet-stream", strings.Repeat("x", 100)},
		{"multipart", "multipart/form-data; boundary=zz", "--zz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/home/user/slow.bin\"\r\n\r\nxxxx"},
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(n.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		fmt.Fprintf(conn, "POST /files?path=%%2Fhome%%2Fuser%%2Fslow.bin HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: %s\r\nE2b-Sandbox-Port: 49983\r\nX-Access-Token: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s",
			s.SandboxID, s.EnvdAccessToken, c.contentType, 1<<20, c.first)
		conn.SetReadDeadline(time.Now().Add(time.Minute))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: no answer: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		json.Unmarshal(b, &e)
		if resp.StatusCode != 400 || e.Code != 400 || !strings.Contains(e.Message, "cut off") {
			t.Errorf("%s: %d %s", c.name, resp.StatusCode, b)
		}
		if took := time.Since(start); took > 4*window {
			t.Errorf("%s: cut off after %v (window %v)", c.name, took, window)
		}
	}
	if r := n.do(t, "GET", "/files?path=%2Fhome%2Fuser%2Fslow.bin", s.envd(), nil); r.status != 404 {
		t.Errorf("the cut-off upload left a file: %d %s", r.status, r.body)
	}
	if r := n.do(t, "POST", "/files?path=%2Fhome%2Fuser%2Fok.txt", s.envd("Content-Type", "application/octet-stream"), strings.NewReader("fine")); r.status != 200 {
		t.Errorf("a quick upload: %d %s", r.status, r.body)
	}
}
