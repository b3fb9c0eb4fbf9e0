package node

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
)

// hostAddr is an address of this host that is not loopback, or the test
// is skipped.
func hostAddr(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Skip("this host has no address beyond loopback")
	return ""
}

func getStatus(t *testing.T, url, key string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// --debug-listen serves profiles openly on loopback, refuses an address
// beyond it without the metrics key, and with the key requires it.
func TestDebugListen(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	addr, stop, err := serveDebug("127.0.0.1:0", "", log)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if got := getStatus(t, "http://"+addr.String()+"/debug/pprof/cmdline", ""); got != 200 {
		t.Errorf("loopback without a key: %d, want 200", got)
	}

	for _, wild := range []string{"0.0.0.0:0", hostAddr(t) + ":0"} {
		if _, _, err := serveDebug(wild, "", log); !errors.Is(err, errDebugExposed) {
			t.Errorf("%s without the metrics key: %v, want refused", wild, err)
		}
	}

	const key = "debug-metrics-key-0123456789"
	addr, stop2, err := serveDebug(hostAddr(t)+":0", key, log)
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	url := "http://" + addr.String() + "/debug/pprof/cmdline"
	for _, c := range []struct {
		key  string
		want int
	}{{"", 401}, {"wrong-key-0123456789", 401}, {key, 200}} {
		if got := getStatus(t, url, c.key); got != c.want {
			t.Errorf("beyond loopback with key %q: %d, want %d", c.key, got, c.want)
		}
	}
}
