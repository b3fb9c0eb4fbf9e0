package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// lowest is the lowest port handed out: above the well-known and most
// registered services' ports.
const lowest = 10000

// Addrs returns n distinct addresses 127.0.0.1:PORT whose ports nothing
// listens on now, each below the kernel's ephemeral port range (where
// the machine's ephemeral range starts too low to leave room, ports the
// kernel picks, as a listen on port 0 does).
func Addrs(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	for _, p := range Ports(t, n) {
		out = append(out, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	}
	return out
}

// Addr is Addrs(t, 1)[0].
func Addr(t testing.TB) string {
	t.Helper()
	return Addrs(t, 1)[0]
}

// Ports returns n distinct loopback TCP ports as Addrs does.
func Ports(t testing.TB, n int) []int {
	t.Helper()
	ports, err := ports(n, ephemeralLow())
	if err != nil {
		t.Fatalf("testport: %v", err)
	}
	return ports
}

// ports finds n ports below high (or the kernel's, when the room below
// high is too small), holding each open until all are found.
func ports(n, high int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var out []int
	for attempt := 0; len(out) < n; attempt++ {
		if attempt > 1000 {
			return nil, fmt.Errorf("no free loopback port below %d after %d tries", high, attempt)
		}
		port := 0
		if high-lowest >= 1000 {
			port = lowest + rand.IntN(high-lowest)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			if port == 0 {
				return nil, err
			}
			continue // taken: draw another
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), or 0 when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return low
}
