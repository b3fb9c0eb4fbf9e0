package guest

import (
	"github.com/airlockhq/airlock/internal/guestabi"

	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// guestIf is the guest's only network interface (virtio-net; the guest
// has no udev to rename it).
const guestIf = "eth0"

// bindResolvConf puts content in front of root's /etc/resolv.conf,
// read-only: the file lives in the initramfs, below the new root once it
// is switched to.
func bindResolvConf(root, content string) error {
	src := "/airlock/resolv.conf"
	if err := os.WriteFile(src, []byte(content), 0o644); err != nil {
		return err
	}
	dst := filepath.Join(root, "etc", "resolv.conf")
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", dst, err)
	}
	return unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}

// networkUp gives the guest's interface its address and the default
// route, once the driver has found the device.
func networkUp(n *guestabi.NetConfig) error {
	var link netlink.Link
	if err := waitFor(20*time.Second, func() bool {
		var err error
		link, err = netlink.LinkByName(guestIf)
		return err == nil
	}); err != nil {
		return fmt.Errorf("no %s: %w", guestIf, err)
	}
	ipnet := &net.IPNet{IP: n.Addr.Addr().AsSlice(), Mask: net.CIDRMask(n.Addr.Bits(), 32)}
	if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: ipnet}); err != nil {
		return fmt.Errorf("address %s: %w", n.Addr, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("%s up: %w", guestIf, err)
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: n.Gateway.AsSlice(), Scope: netlink.SCOPE_UNIVERSE}); err != nil {
		return fmt.Errorf("default route via %s: %w", n.Gateway, err)
	}
	return nil
}
