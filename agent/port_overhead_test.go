package agent_test

import (
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestPortOverhead measures a port stream (host client, agent, loopback
// TCP) against a direct TCP connection to the same echo server: the
// round trip of one byte (p50, p99) and the throughput of 64 MiB one way.
// It runs with AIRLOCK_BENCH=1 only; BENCHMARKS.md has its figures.
func TestPortOverhead(t *testing.T) {
	if os.Getenv("AIRLOCK_BENCH") == "" {
		t.Skip("a measurement: set AIRLOCK_BENCH=1")
	}
	port := echoServer(t)
	h := start(t)
	dial := map[string]func() net.Conn{
		"direct TCP": func() net.Conn {
			c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
		"agent port stream": func() net.Conn {
			c, err := h.c.DialPort(h.ctx(5*time.Second), port)
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
	}
	for _, name := range []string{"direct TCP", "agent port stream"} {
		c := dial[name]()
		var rtts []time.Duration
		b := []byte{1}
		for i := 0; i < 2000; i++ {
			start := time.Now()
			if _, err := c.Write(b); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, b); err != nil {
				t.Fatal(err)
			}
			rtts = append(rtts, time.Since(start))
		}
		slices.Sort(rtts)
		c.Close()
		// Throughput: write 64 MiB, read the echo concurrently.
		c = dial[name]()
		const n = 64 << 20
		done := make(chan int64)
		go func() { m, _ := io.CopyN(io.Discard, c, n); done <- m }()
		start := time.Now()
		buf := make([]byte, 256<<10)
		for sent := 0; sent < n; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				t.Fatal(err)
			}
		}
		if m := <-done; m != n {
			t.Fatalf("%s: echoed %d of %d", name, m, n)
		}
		el := time.Since(start)
		c.Close()
		t.Logf("%-18s rtt p50 %v p99 %v; 64 MiB echoed in %v: %.0f MB/s each way",
			name, rtts[len(rtts)/2], rtts[len(rtts)*99/100], el.Round(time.Millisecond), float64(n)/el.Seconds()/1e6)
	}
}
