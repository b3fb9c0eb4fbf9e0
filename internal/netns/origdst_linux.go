package netns

import (
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// OriginalDst returns where a connection that the redirect rule brought to
// a local listener was addressed (SO_ORIGINAL_DST): the address the
// sandbox dialled. It is for the record only; it is never dialled.
func OriginalDst(c *net.TCPConn) (netip.AddrPort, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var ap netip.AddrPort
	var serr error
	err = raw.Control(func(fd uintptr) {
		// The kernel answers with a sockaddr_in; the IPv6 mreq getter is
		// the usual way to read its 16 bytes.
		mreq, err := unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			serr = err
			return
		}
		b := mreq.Multiaddr
		port := uint16(b[2])<<8 | uint16(b[3])
		ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), port)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("netns: original destination: %w", err)
	}
	return ap, nil
}
