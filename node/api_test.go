package node

import (
	"net"
	"testing"
)

func TestLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true,
		"127.0.0.2:8080": true,
		"[::1]:8080":     true,
		"0.0.0.0:8080":   false,
		"[::]:8080":      false,
		"10.0.0.7:8080":  false,
		"192.0.2.1:80":   false,
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := loopbackOnly(a); got != want {
			t.Errorf("loopbackOnly(%s) = %v, want %v", addr, got, want)
		}
	}
	if loopbackOnly(&net.UnixAddr{Name: "/run/airlock.sock", Net: "unix"}) {
		t.Error("a unix socket counted as loopback")
	}
}
