package upload_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/internal/upload"
)

// server reads each request's body through upload.Body and answers 200
// with the byte count, or 400 with the problem type.
func server(t *testing.T, rate upload.Rate) string {
	t.Helper()
	if err := rate.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upload.Body(w, r, rate)
		n, err := io.Copy(io.Discard, r.Body)
		var ae *airlock.Error
		if errors.As(err, &ae) {
			http.Error(w, ae.Type, http.StatusBadRequest)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, n)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// send opens a raw connection, announces size bytes and sends what
// chunks gives (each after its pause), then reads the answer.
func send(t *testing.T, addr string, size int, chunks func(c net.Conn)) (int, string, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "PUT /f HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size)
	chunks(c)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), time.Since(start)
}

// A trickling upload is cut off after about one window with the
// problem upload-too-slow; one that keeps the rate up goes through over
// many windows.
func TestMinimumRate(t *testing.T) {
	rate := upload.Rate{MinBytesPerSec: 10 << 10, Window: 300 * time.Millisecond} // 3 KiB per window
	addr := server(t, rate)

	status, body, took := send(t, addr, 1<<20, func(c net.Conn) {
		c.Write([]byte("only a few bytes")) // and then nothing, the connection open
	})
	if status != 400 || body != upload.ProblemTooSlow {
		t.Fatalf("slow-loris upload: %d %q", status, body)
	}
	if took > 5*time.Second {
		t.Errorf("cut off after %v, want about one window (%v)", took, rate.Window)
	}

	// 1 KiB every 50 ms is 20 KiB/s: twice the minimum, for 2 s.
	const chunk, n = 1 << 10, 40
	status, body, _ = send(t, addr, chunk*n, func(c net.Conn) {
		for i := 0; i < n; i++ {
			c.Write(make([]byte, chunk))
			time.Sleep(50 * time.Millisecond)
		}
	})
	if status != 200 || body != fmt.Sprint(chunk*n) {
		t.Fatalf("steady upload: %d %q", status, body)
	}

	// 1 KiB every 200 ms is 5 KiB/s: half the minimum.
	status, body, _ = send(t, addr, chunk*n, func(c net.Conn) {
		for i := 0; i < n; i++ {
			if _, err := c.Write(make([]byte, chunk)); err != nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	if status != 400 || body != upload.ProblemTooSlow {
		t.Fatalf("upload below the minimum: %d %q", status, body)
	}
}

func TestRateValidate(t *testing.T) {
	var r upload.Rate
	if err := r.Validate(); err != nil || r.MinBytesPerSec != upload.DefaultMinBytesPerSec || r.Window != upload.DefaultWindow {
		t.Fatalf("defaults: %+v, %v", r, err)
	}
	for _, bad := range []upload.Rate{{MinBytesPerSec: -1}, {Window: -time.Second}, {Window: time.Millisecond}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
