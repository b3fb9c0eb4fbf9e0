package fleet

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// errOutsideRange refuses a dial to an address outside Config.NodeRanges.
var errOutsideRange = errors.New("fleet: the node's address is outside the configured node ranges")

// inRanges reports whether a is in one of ranges.
func inRanges(ranges []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ranges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// newTransport carries forwards: it dials only addresses within ranges,
// checked on the address really connected to (after name resolution),
// so a node record in etcd cannot send requests, and the keys they
// carry, anywhere else.
func newTransport(ranges []netip.Prefix) *http.Transport {
	d := &net.Dialer{
		Timeout:   3 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", errOutsideRange, address)
			}
			if !inRanges(ranges, ap.Addr()) {
				return fmt.Errorf("%w: %s", errOutsideRange, ap.Addr())
			}
			return nil
		},
	}
	return &http.Transport{
		DialContext:           d.DialContext,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // runs and streams take as long as they take
		Proxy:                 nil,
	}
}
