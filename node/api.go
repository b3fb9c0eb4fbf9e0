package node

import (
	"net"
)

// loopbackOnly reports whether a listener's address is a loopback
// address (127.0.0.0/8 or ::1), so only this host can reach it.
func loopbackOnly(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
