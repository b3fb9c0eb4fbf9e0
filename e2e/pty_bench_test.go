package e2e_test

import (
	"context"
	"io"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/teststack"
)

// BenchmarkPTYEcho measures keystroke echo: one byte typed into a
// terminal running cat (the terminal echoes it) until it comes back.
// "airlock" is over the REST WebSocket to a session's terminal, "host"
// the same on a pseudo-terminal of this machine (the baseline). Reports
// the median and p99 in microseconds.
//
//	go test -run '^$' -bench BenchmarkPTYEcho -benchtime 500x ./e2e/
func BenchmarkPTYEcho(b *testing.B) {
	b.Run("host", func(b *testing.B) {
		cmd := exec.Command("cat")
		f, err := pty.Start(cmd)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait(); f.Close() }()
		echoes(b, f, f)
	})
	b.Run("airlock", func(b *testing.B) {
		st := teststack.New(b, teststack.Options{MaxTimeout: time.Minute})
		tn := st.NewTenant(b, "bench-pty")
		ctx := context.Background()
		sess, _, err := tn.Client.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"})
		if err != nil {
			b.Fatal(err)
		}
		defer tn.Client.DeleteSession(ctx, sess.ID)
		info, err := tn.Client.CreatePTY(ctx, sess.ID, airlock.CreatePTYRequest{Cols: 80, Rows: 24, Cmd: []string{"cat"}})
		if err != nil {
			b.Fatal(err)
		}
		conn, err := tn.Client.AttachPTY(ctx, sess.ID, info.PTYID)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		echoes(b, conn, conn)
	})
}

// echoes types b.N keystrokes, each after the last one's echo, and
// reports the latencies.
func echoes(b *testing.B, w io.Writer, r io.Reader) {
	got := make(chan byte, 4096)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			for _, c := range buf[:n] {
				got <- c
			}
			if err != nil {
				close(got)
				return
			}
		}
	}()
	key := func(c byte) time.Duration {
		start := time.Now()
		if _, err := w.Write([]byte{c}); err != nil {
			b.Fatal(err)
		}
		timeout := time.After(30 * time.Second)
		for {
			select {
			case e, ok := <-got:
				if !ok {
					b.Fatal("the terminal ended")
				}
				if e == c {
					return time.Since(start)
				}
			case <-timeout:
				b.Fatalf("no echo of %q within 30s", c)
			}
		}
	}
	for i := range 20 { // warm up: the first keystrokes start cat's read
		key(byte('a' + i%26))
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		lat = append(lat, key(byte('a'+i%26)))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
}
