package testport

import (
	"net"
	"strconv"
	"testing"
)

func TestPortsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low == 0 {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range")
	}
	ps := Ports(t, 20)
	seen := map[int]bool{}
	for _, p := range ps {
		if seen[p] {
			t.Errorf("port %d handed out twice", p)
		}
		seen[p] = true
		if low-lowest >= 1000 && (p < lowest || p >= low) {
			t.Errorf("port %d is outside [%d, %d)", p, lowest, low)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d cannot be bound: %v", p, err)
		}
		ln.Close()
	}
}

func TestPortsRange(t *testing.T) {
	// No room below the ephemeral range: the kernel's choice.
	if _, err := ports(1, 0); err != nil {
		t.Fatalf("the kernel's choice failed: %v", err)
	}
	got, err := ports(3, lowest+1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range got {
		if p < lowest || p >= lowest+1000 {
			t.Errorf("port %d outside the range asked for", p)
		}
	}
}
