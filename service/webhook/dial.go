package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/airlockhq/airlock/service/egress"
)

// ErrRefusedAddress is wrapped by the error of a delivery whose host
// resolves to an address the egress rules refuse.
var ErrRefusedAddress = errors.New("webhook: address refused by the egress rules")

var metadata = []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254")}

// refused reports whether a webhook may not connect to a, and why.
// Without allowPrivate every range the egress proxy refuses by default
// is refused (private, loopback, link-local, CGNAT, reserved, ...); with
// it those are permitted, but never the metadata address, multicast or
// unspecified addresses.
func refused(a netip.Addr, allowPrivate bool) (bool, string) {
	a = a.Unmap()
	for _, m := range metadata {
		if a == m {
			return true, "the cloud metadata address"
		}
	}
	if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return true, "an address no webhook may reach"
	}
	if allowPrivate {
		return false, ""
	}
	for _, p := range egress.DefaultForbidden {
		if p.Contains(a) {
			return true, "a private, loopback, link-local or reserved address (the node does not permit webhooks to private addresses)"
		}
	}
	return false, ""
}

// Resolver looks up a host's addresses (net.DefaultResolver's shape).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// dialer resolves the host once, checks every address and connects to a
// checked address itself: the name is never resolved again between the
// check and the connection (no DNS rebinding).
type dialer struct {
	resolver     Resolver
	allowPrivate bool
	timeout      time.Duration
}

func (d *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = d.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no address", host)
	}
	for _, a := range addrs {
		if bad, why := refused(a, d.allowPrivate); bad {
			return nil, fmt.Errorf("%w: %s resolves to %s", ErrRefusedAddress, host, why)
		}
	}
	nd := net.Dialer{Timeout: d.timeout}
	var errs []error
	for _, a := range addrs {
		c, err := nd.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}
