package microvm

import (
	"github.com/airlockhq/airlock/internal/guestabi"

	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/netns"
)

// Names of the links the backend adds inside a sandbox's network
// namespace.
const (
	tapName    = "vmtap0"
	bridgeName = "vmbr0"
)

// guestNetwork is a sandbox's network as its VM sees it: the tap device
// QEMU's virtio-net device reads and writes, and what the guest's init
// configures (package guestinit).
type guestNetwork struct {
	tap *os.File
	mac string
	cfg guestabi.NetConfig
}

// plugNetwork puts a tap device into the sandbox's network namespace (n,
// made by the node's egress) in place of the namespace's own stack, as
// runsc's netstack takes over the link in the gVisor backend: the tap
// and the namespace's link are joined by a bridge, and the address and
// default route leave the namespace for the guest, which sets them on
// its interface. The host end of the link, its rules and the egress
// proxy see the guest's packets as they would the namespace's: same
// address, same link. The tap is not persistent: it goes with the last
// descriptor, the VMM's. The bridge goes with the namespace.
func plugNetwork(n *airlock.SandboxNetwork, id string) (*guestNetwork, error) {
	if n.NetNSPath == "" {
		return nil, errors.New("microvm: a sandbox network needs a namespace")
	}
	g := &guestNetwork{mac: guestMAC(id), cfg: guestabi.NetConfig{ResolvConf: n.ResolvConf}}
	err := netns.Do(n.NetNSPath, func() error {
		link, addr, gw, err := namespaceLink()
		if err != nil {
			return err
		}
		g.cfg.Addr, g.cfg.Gateway = addr, gw
		if err := g.cfg.Validate(); err != nil {
			return err
		}
		tap, err := openTap(tapName)
		if err != nil {
			return err
		}
		g.tap = tap
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName, MTU: link.Attrs().MTU}}
		if err := netlink.LinkAdd(br); err != nil {
			return fmt.Errorf("bridge: %w", err)
		}
		tl, err := netlink.LinkByName(tapName)
		if err != nil {
			return err
		}
		// The namespace's stack gives its address up, so only the guest
		// answers for it; the default route goes with it.
		if err := netlink.AddrDel(link, &netlink.Addr{IPNet: prefixNet(addr)}); err != nil {
			return fmt.Errorf("address: %w", err)
		}
		for _, step := range []func() error{
			func() error { return netlink.LinkSetMTU(tl, link.Attrs().MTU) },
			func() error { return netlink.LinkSetMaster(link, br) },
			func() error { return netlink.LinkSetMaster(tl, br) },
			func() error { return netlink.LinkSetUp(tl) },
			func() error { return netlink.LinkSetUp(br) },
		} {
			if err := step(); err != nil {
				return fmt.Errorf("bridge: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		if g.tap != nil {
			g.tap.Close()
		}
		return nil, fmt.Errorf("microvm: sandbox network: %w", err)
	}
	return g, nil
}

// namespaceLink finds the namespace's one link with an IPv4 address (the
// sandbox end of its veth pair), the address and the default route's
// gateway.
func namespaceLink() (netlink.Link, netip.Prefix, netip.Addr, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, netip.Prefix{}, netip.Addr{}, err
	}
	var found netlink.Link
	var addr netip.Prefix
	for _, l := range links {
		if l.Attrs().Flags&net.FlagLoopback != 0 {
			continue
		}
		as, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return nil, netip.Prefix{}, netip.Addr{}, err
		}
		if len(as) == 0 {
			continue
		}
		if found != nil || len(as) != 1 {
			return nil, netip.Prefix{}, netip.Addr{}, errors.New("the namespace has more than one IPv4 address")
		}
		ip, ok := netip.AddrFromSlice(as[0].IP.To4())
		bits, _ := as[0].Mask.Size()
		if !ok {
			return nil, netip.Prefix{}, netip.Addr{}, errors.New("the namespace's address is not IPv4")
		}
		found, addr = l, netip.PrefixFrom(ip, bits)
	}
	if found == nil {
		return nil, netip.Prefix{}, netip.Addr{}, errors.New("the namespace has no IPv4 address")
	}
	routes, err := netlink.RouteList(found, netlink.FAMILY_V4)
	if err != nil {
		return nil, netip.Prefix{}, netip.Addr{}, err
	}
	for _, r := range routes {
		if (r.Dst == nil || r.Dst.IP.IsUnspecified()) && r.Gw != nil {
			gw, ok := netip.AddrFromSlice(r.Gw.To4())
			if ok && addr.Contains(gw) {
				return found, addr, gw, nil
			}
		}
	}
	return nil, netip.Prefix{}, netip.Addr{}, errors.New("the namespace has no default route on its link")
}

// openTap makes a tap device of this name in the calling thread's network
// namespace (frames without the packet-information header) and returns
// its descriptor.
func openTap(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("tap: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tap %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// guestMAC is the guest interface's address: locally administered,
// unicast, from the sandbox's ID.
func guestMAC(id string) string {
	h := sha256.Sum256([]byte("airlock microvm mac\x00" + id))
	h[0] = h[0]&^0x01 | 0x02
	return net.HardwareAddr(h[:6]).String()
}
