package egress_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// The benchmarks of BENCHMARKS.md ("Network"). Run them with
//
//	AIRLOCK_TEST_AGENT=$PWD/bin/airlock-agent go test -run XXX -bench . -benchtime 10x ./egress/
//
// Both ends of every transfer are on this machine: the servers live in the
// test internet's namespace.

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkSessionStart: creating a session (to ready) without a network
// and with one (namespace, link, rules, runsc --network=sandbox).
func BenchmarkSessionStart(b *testing.B) {
	w := newWorld(b)
	ctx := context.Background()
	for _, net := range []*airlock.NetworkPolicy{{Mode: airlock.NetworkNone}, {Mode: airlock.NetworkAllowList, Allow: []string{"api.test"}}} {
		b.Run(net.Mode, func(b *testing.B) {
			var ds []time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				s, _, err := w.mgr.CreateSession(ctx, w.tenant, airlock.CreateSessionRequest{Image: "base", Network: net}, "")
				if err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(start))
				b.StopTimer()
				w.mgr.DeleteSession(ctx, w.tenant, s.ID)
				b.StartTimer()
			}
			b.ReportMetric(float64(median(ds).Microseconds())/1000, "ms-p50")
		})
	}
}

// zeros serves n bytes of zeros.
func zeros(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
	w.Header().Set("Content-Length", strconv.Itoa(n))
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, len(buf))
		if _, err := w.Write(buf[:k]); err != nil {
			return
		}
		n -= k
	}
}

const downloadBytes = 100 << 20

// BenchmarkDownload100MB: 100 MB over HTTP from the test internet, from
// the host directly and through the proxy, from a namespace with the
// kernel's stack (the proxy's own cost) and from a gVisor sandbox (what
// code sees; timed inside the sandbox). Each iteration does all three in
// turn, so the ratios compare like with like on a busy machine.
func BenchmarkDownload100MB(b *testing.B) {
	w := newWorld(b)
	srv := w.inet.ServeHTTP(http.HandlerFunc(zeros))
	w.inet.SetName("big.test", srv)
	path := "/" + strconv.Itoa(downloadBytes)
	get := func(c *http.Client, url string) time.Duration {
		start := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != downloadBytes {
			b.Fatalf("got %d bytes: %v", n, err)
		}
		return time.Since(start)
	}
	direct := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	sb := w.attach([]string{"big.test"})
	proxied := sb.client()
	id := w.session(b, &airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"big.test"}})
	script := `import sys, time, urllib.request
t = time.time(); n = 0
with urllib.request.urlopen("http://big.test` + path + `", timeout=60) as r:
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        n += len(b)
print(n, time.time() - t)`
	var dDirect, dNetns, dGvisor time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dDirect += get(direct, "http://"+srv.String()+path)
		dNetns += get(proxied, "http://big.test"+path)
		e := w.sh(b, id, "python3 -c '"+script+"'")
		var n int
		var secs float64
		if _, err := fmt.Sscan(e.Stdout, &n, &secs); err != nil || n != downloadBytes {
			b.Fatalf("download in the sandbox: %q %q", e.Stdout, e.Stderr)
		}
		dGvisor += time.Duration(secs * float64(time.Second))
	}
	mbps := func(d time.Duration) float64 { return float64(downloadBytes) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(dDirect), "direct-MB/s")
	b.ReportMetric(mbps(dNetns), "proxy-netns-MB/s")
	b.ReportMetric(mbps(dGvisor), "proxy-gvisor-MB/s")
	b.ReportMetric(mbps(dNetns)/mbps(dDirect), "ratio-netns")
	b.ReportMetric(mbps(dGvisor)/mbps(dDirect), "ratio-gvisor")
}

// BenchmarkProxyConnections: new connections per second through the
// proxy from 8 sandboxes at once, each connection a short HTTP request
// on a connection of its own (and one audit event).
func BenchmarkProxyConnections(b *testing.B) {
	w := newWorld(b)
	srv := w.inet.ServeHTTP(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Connection", "close")
		io.WriteString(rw, "ok")
	}))
	w.inet.SetName("c.test", srv)
	const sandboxes, window = 8, 10 * time.Second
	// Made once: b.Run calls its function more than once, and a tenant
	// has at most 8 live sessions.
	ids := make([]string, sandboxes)
	for i := range ids {
		ids[i] = w.session(b, &airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"c.test"}})
	}
	b.Run("gvisor-8", func(b *testing.B) {
		script := fmt.Sprintf(`import socket, threading, time
addr = socket.gethostbyname("c.test")
end = time.time() + %d
counts = [0] * 4
def run(i):
    while time.time() < end:
        s = socket.create_connection((addr, 80), timeout=10)
        s.sendall(b"GET / HTTP/1.1\r\nHost: c.test\r\nConnection: close\r\n\r\n")
        while s.recv(4096):
            pass
        s.close()
        counts[i] += 1
ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print(sum(counts))`, int(window.Seconds()))
		var rates []float64
		for i := 0; i < b.N; i++ {
			var total atomic.Int64
			var wg sync.WaitGroup
			for _, id := range ids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					e := w.sh(b, id, "python3 -c '"+script+"'")
					n, err := strconv.Atoi(strings.TrimSpace(e.Stdout))
					if err != nil {
						b.Errorf("client: %q %q", e.Stdout, e.Stderr)
					}
					total.Add(int64(n))
				}()
			}
			wg.Wait()
			rates = append(rates, float64(total.Load())/window.Seconds())
		}
		b.ReportMetric(slices.Max(rates), "conns/s")
	})
	sbs := make([]*sandbox, sandboxes)
	for i := range sbs {
		sbs[i] = w.attach([]string{"c.test"})
	}
	b.Run("netns-8", func(b *testing.B) {
		target := netip.AddrPortFrom(srv, 80).String()
		var rates []float64
		for i := 0; i < b.N; i++ {
			var total atomic.Int64
			var wg sync.WaitGroup
			end := time.Now().Add(window)
			for _, sb := range sbs {
				for k := 0; k < 4; k++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						buf := make([]byte, 4096)
						for time.Now().Before(end) {
							var c net.Conn
							if err := sb.do(func() error {
								var err error
								c, err = net.DialTimeout("tcp4", target, 10*time.Second)
								return err
							}); err != nil {
								b.Error(err)
								return
							}
							io.WriteString(c, "GET / HTTP/1.1\r\nHost: c.test\r\nConnection: close\r\n\r\n")
							for {
								if _, err := c.Read(buf); err != nil {
									break
								}
							}
							c.Close()
							total.Add(1)
						}
					}()
				}
			}
			wg.Wait()
			rates = append(rates, float64(total.Load())/window.Seconds())
		}
		b.ReportMetric(slices.Max(rates), "conns/s")
	})
}

// BenchmarkAttach: making and removing a sandbox network alone
// (namespace, veth pair, addresses, route, both tables), the part of a
// networked start that is not runsc's.
func BenchmarkAttach(b *testing.B) {
	f := newFixture(b, fixtureOpts{})
	ctx := context.Background()
	var made, removed time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		att, err := f.svc.Attach(ctx, airlock.NetworkRequest{TenantID: f.tenant.ID, SessionID: "bench", Policy: airlock.NetworkPolicy{Mode: airlock.NetworkAllowList}})
		if err != nil {
			b.Fatal(err)
		}
		made += time.Since(start)
		start = time.Now()
		if err := att.Close(ctx); err != nil {
			b.Fatal(err)
		}
		removed += time.Since(start)
	}
	b.ReportMetric(float64(made.Microseconds())/1000/float64(b.N), "attach-ms")
	b.ReportMetric(float64(removed.Microseconds())/1000/float64(b.N), "close-ms")
}
