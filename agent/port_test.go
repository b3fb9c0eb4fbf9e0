package agent_test

import (
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
)

// echoServer listens on loopback and echoes every connection.
func echoServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
				c.Close()
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestPortEcho(t *testing.T) {
	h := start(t)
	port := echoServer(t)
	c, err := h.c.DialPort(h.ctx(5*time.Second), port)
	if err != nil {
		t.Fatalf("DialPort: %v", err)
	}
	defer c.Close()
	// More than a few windows, so flow control is exercised both ways.
	data := make([]byte, 5*protocol.PortWindow+123)
	rand.Read(data)
	go func() {
		c.Write(data)
		c.(interface{ CloseWrite() error }).CloseWrite()
	}()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("echoed %d bytes that differ from the %d sent", len(got), len(data))
	}
}

func TestPortSlowReader(t *testing.T) {
	// A server that writes far more than a window while nobody reads
	// must not make the agent buffer it: the host side holds at most a
	// window, and health requests on the same connection still answer.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	wrote := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		n, _ := io.Copy(c, io.LimitReader(zeroReader{}, 64<<20))
		wrote <- n
	}()
	h := start(t)
	c, err := h.c.DialPort(h.ctx(5*time.Second), ln.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatalf("DialPort: %v", err)
	}
	defer c.Close()
	n := <-wrote
	// A window on the host, one in flight, and the kernel's socket
	// buffers: far less than the 64 MiB offered.
	if n >= 32<<20 {
		t.Fatalf("the server wrote %d bytes with nobody reading", n)
	}
	h.healthy()
	if _, err := io.CopyN(io.Discard, c, 1<<20); err != nil {
		t.Fatalf("reading after the stall: %v", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) { clear(b); return len(b), nil }

func TestPortRefused(t *testing.T) {
	h := start(t)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	_, err := h.c.DialPort(h.ctx(5*time.Second), port)
	if code := remoteCode(t, err); code != "refused" {
		t.Fatalf("dial of a closed port: code %q", code)
	}
	for _, p := range []int{0, -1, 65536, 1 << 20} {
		if _, err := h.c.DialPort(h.ctx(time.Second), p); err == nil {
			t.Fatalf("port %d accepted", p)
		}
	}
}

func TestPortRequestValidation(t *testing.T) {
	// Only a number names what to reach: an address in any form is no
	// field of the request, and out-of-range ports are refused on decode.
	for _, raw := range []string{
		`{"op":"port","port":0}`,
		`{"op":"port","port":65536}`,
		`{"op":"port","port":-80}`,
		`{"op":"port","port":"80"}`,
		`{"op":"port","port":80,"host":"169.254.169.254"}`,
		`{"op":"port","port":80,"addr":"10.0.0.1:80"}`,
		`{"op":"port"}`,
	} {
		var r protocol.Request
		if err := protocol.Decode([]byte(raw), &r); err == nil {
			t.Errorf("%s accepted", raw)
		}
	}
	var r protocol.Request
	if err := protocol.Decode([]byte(`{"op":"port","port:`+strconv.Itoa(8080)+`}`), &r); err == nil {
		t.Fatal("bad JSON accepted")
	}
	if err := protocol.Decode([]byte(`{"op":"port","port":8080}`), &r); err != nil || r.Port != 8080 {
		t.Fatalf("good request: %v %+v", err, r)
	}
}
