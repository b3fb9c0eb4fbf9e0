package netns

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
)

// Config configures a Manager.
type Config struct {
	// Prefix starts the name of every namespace, link and nftables table
	// the manager makes: 1 to 6 lower-case letters and digits, starting
	// with a letter. Two managers on one host must not share it.
	Prefix string
	// Dir is where namespaces are bind-mounted; DefaultDir if empty.
	Dir string
	// Subnet is an IPv4 range the /30 of each sandbox is taken from: the
	// host end of the link gets .1, the sandbox .2. /16 gives 16384.
	Subnet netip.Prefix
	// ProxyPort and DNSPort are the ports of the node's egress proxy and
	// resolver on the host; every TCP connection is redirected to the
	// first, DNS to the second.
	ProxyPort uint16
	DNSPort   uint16
	// MTU of the link; 1500 if zero.
	MTU    int
	Logger *slog.Logger
}

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if len(c.Prefix) < 1 || len(c.Prefix) > 6 || c.Prefix[0] < 'a' || c.Prefix[0] > 'z' {
		return fmt.Errorf("netns: prefix must be 1 to 6 lower-case letters and digits, starting with a letter")
	}
	for _, ch := range c.Prefix {
		if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9') {
			return fmt.Errorf("netns: prefix must be 1 to 6 lower-case letters and digits, starting with a letter")
		}
	}
	if c.Dir == "" {
		c.Dir = DefaultDir
	}
	if !c.Subnet.IsValid() || !c.Subnet.Addr().Is4() || c.Subnet.Bits() > 28 || c.Subnet.Bits() < 8 {
		return fmt.Errorf("netns: subnet must be an IPv4 prefix between /8 and /28")
	}
	c.Subnet = c.Subnet.Masked()
	if c.ProxyPort == 0 || c.DNSPort == 0 {
		return fmt.Errorf("netns: proxy and DNS ports are required")
	}
	if c.MTU == 0 {
		c.MTU = 1500
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Manager makes sandbox networks.
type Manager struct {
	cfg   Config
	slots int

	mu       sync.Mutex
	used     map[int]bool
	detached int // networks let go of for a later process (Forget)

	baseMu    sync.Mutex
	baseReady bool // the shared table is in place
}

// New returns a manager. It touches nothing on the host.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	slots := 1 << (32 - cfg.Subnet.Bits() - 2)
	if slots > 1<<16 {
		slots = 1 << 16
	}
	return &Manager{cfg: cfg, slots: slots, used: map[int]bool{}}, nil
}

// Config returns the manager's configuration, defaults filled in.
func (m *Manager) Config() Config { return m.cfg }

// Link is one sandbox's network: its namespace, the veth pair and the
// rules on the host end.
type Link struct {
	Slot      int
	Name      string // of the namespace, its tables and (with a suffix) its host link
	NSPath    string
	HostIf    string     // the host end of the veth pair
	SandboxIf string     // the end in the namespace
	HostIP    netip.Addr // the sandbox's gateway, resolver and broker address
	SandboxIP netip.Addr
}

func (m *Manager) name(slot int) string { return fmt.Sprintf("%s%04x", m.cfg.Prefix, slot) }

func (m *Manager) addrs(slot int) (host, sandbox netip.Addr) {
	b := m.cfg.Subnet.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(slot)*4 + 1
	host = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	return host, host.Next()
}

func (m *Manager) take() (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := 0; i < m.slots; i++ {
		if !m.used[i] {
			m.used[i] = true
			return i, nil
		}
	}
	return 0, fmt.Errorf("netns: all %d sandbox networks of %s are in use", m.slots, m.cfg.Subnet)
}

func (m *Manager) free(slot int) {
	m.mu.Lock()
	delete(m.used, slot)
	m.mu.Unlock()
}

// Create makes a sandbox network: the namespace, the veth pair with
// addresses and a default route, IPv6 off on both ends, and the rules.
// On error nothing of it is left.
func (m *Manager) Create() (*Link, error) {
	slot, err := m.take()
	if err != nil {
		return nil, err
	}
	host, sb := m.addrs(slot)
	l := &Link{
		Slot:      slot,
		Name:      m.name(slot),
		HostIf:    m.name(slot) + "h",
		SandboxIf: "eth0",
		HostIP:    host,
		SandboxIP: sb,
	}
	// A link or table of this name is left from a crash (Reconcile not
	// run): clear it first.
	m.remove(l)
	if err := m.create(l); err != nil {
		if rerr := m.remove(l); rerr == nil {
			m.free(slot)
		}
		return nil, err
	}
	return l, nil
}

func (m *Manager) create(l *Link) error {
	path, err := NewNamed(m.cfg.Dir, l.Name)
	if err != nil {
		return err
	}
	l.NSPath = path
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("netns: open %s: %w", path, err)
	}
	defer ns.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: l.HostIf, MTU: m.cfg.MTU},
		PeerName:      l.SandboxIf,
		PeerNamespace: netlink.NsFd(int(ns)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("netns: add veth %s: %w", l.HostIf, err)
	}
	// Host end: no IPv6 at all, the /30, up.
	if err := writeSysctl("net/ipv6/conf/"+l.HostIf+"/disable_ipv6", "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	hl, err := netlink.LinkByName(l.HostIf)
	if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	if err := netlink.AddrAdd(hl, &netlink.Addr{IPNet: ipnet(l.HostIP, 30)}); err != nil {
		return fmt.Errorf("netns: address %s: %w", l.HostIf, err)
	}
	// The rules go in before the link comes up, so no packet passes
	// unfiltered.
	if err := m.addRules(l); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(hl); err != nil {
		return fmt.Errorf("netns: up %s: %w", l.HostIf, err)
	}
	// Namespace end.
	return Do(path, func() error {
		for _, k := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6", "net/ipv6/conf/" + l.SandboxIf + "/disable_ipv6"} {
			if err := writeSysctl(k, "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		sl, err := netlink.LinkByName(l.SandboxIf)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(sl, &netlink.Addr{IPNet: ipnet(l.SandboxIP, 30)}); err != nil {
			return fmt.Errorf("netns: address %s: %w", l.SandboxIf, err)
		}
		if err := netlink.LinkSetUp(sl); err != nil {
			return err
		}
		gw := net.IP(l.HostIP.AsSlice())
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: sl.Attrs().Index, Gw: gw}); err != nil {
			return fmt.Errorf("netns: default route: %w", err)
		}
		return nil
	})
}

func ipnet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, 32)}
}

// Delete removes a sandbox network: rules, link and namespace. Call it
// after the sandbox is gone.
func (m *Manager) Delete(l *Link) error {
	if l == nil {
		return nil
	}
	err := m.remove(l)
	if err == nil {
		m.free(l.Slot)
	}
	return err
}

// remove deletes what exists of l; what does not exist is no error.
func (m *Manager) remove(l *Link) error {
	var errs []error
	if err := m.deleteRules(l.Name); err != nil {
		errs = append(errs, err)
	}
	if hl, err := netlink.LinkByName(l.HostIf); err == nil {
		if err := netlink.LinkDel(hl); err != nil {
			errs = append(errs, fmt.Errorf("netns: delete %s: %w", l.HostIf, err))
		}
	}
	if err := DeleteNamed(filepath.Join(m.cfg.Dir, l.Name)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ours reports whether a name is one this manager makes.
func (m *Manager) ours(name string) bool {
	if !strings.HasPrefix(name, m.cfg.Prefix) {
		return false
	}
	rest := strings.TrimSuffix(name[len(m.cfg.Prefix):], "h")
	if len(rest) != 4 {
		return false
	}
	for _, c := range rest {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Reconcile removes every namespace, link and table of this prefix that no
// Link of this manager holds: what a crashed process left. It returns the
// names it removed.
func (m *Manager) Reconcile() ([]string, error) {
	m.mu.Lock()
	held := map[string]bool{}
	for slot := range m.used {
		held[m.name(slot)] = true
	}
	m.mu.Unlock()
	found := map[string]bool{}
	var errs []error
	links, err := netlink.LinkList()
	if err != nil {
		errs = append(errs, err)
	}
	for _, l := range links {
		n := l.Attrs().Name
		if m.ours(n) && strings.HasSuffix(n, "h") && !held[strings.TrimSuffix(n, "h")] {
			found[strings.TrimSuffix(n, "h")] = true
		}
	}
	netdev, ip, err := m.listTables()
	if err != nil {
		errs = append(errs, err)
	}
	for _, t := range netdev {
		if m.ours(t) && !held[t] {
			found[t] = true
		}
	}
	entries, _ := os.ReadDir(m.cfg.Dir)
	for _, e := range entries {
		if m.ours(e.Name()) && !held[e.Name()] {
			found[e.Name()] = true
		}
	}
	var out []string
	for n := range found {
		l := &Link{Name: n, HostIf: n + "h"}
		if err := m.remove(l); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, n)
	}
	// The shared table goes too when nothing is held: the next network
	// makes it afresh, with this run's ports.
	if len(held) == 0 && slices.Contains(ip, m.cfg.Prefix) {
		if err := m.deleteBase(); err != nil {
			errs = append(errs, err)
		} else {
			out = append(out, m.cfg.Prefix)
		}
	}
	return out, errors.Join(errs...)
}

// Held is how many sandbox networks this manager holds.
func (m *Manager) Held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.used)
}

// Close removes the shared table. Every network must be deleted first, or
// let go of with Forget: then the shared table stays, since the networks
// a later process takes back rely on it (without it nothing would stop
// their packets from being forwarded).
func (m *Manager) Close() error {
	m.mu.Lock()
	n, detached := len(m.used), m.detached
	m.mu.Unlock()
	if n > 0 {
		return fmt.Errorf("netns: %d sandbox networks still exist", n)
	}
	if detached > 0 {
		return nil
	}
	return m.deleteBase()
}

// Forget lets go of a network without removing it, for a sandbox that
// outlives this process: a later process takes it back with Adopt (or its
// reconciler removes it).
func (m *Manager) Forget(l *Link) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.used[l.Slot] {
		delete(m.used, l.Slot)
		m.detached++
	}
}

// Adopt takes over the network name that an earlier process of this
// prefix made and let go of (or left when it crashed) for a sandbox that
// lives on. The network must be whole: its namespace, its host link and
// its ingress table. The shared table is made again for this process's
// ports.
func (m *Manager) Adopt(name string) (*Link, error) {
	if !m.ours(name) || strings.HasSuffix(name, "h") {
		return nil, fmt.Errorf("netns: %q is not a network of prefix %s", name, m.cfg.Prefix)
	}
	slot, err := strconv.ParseUint(name[len(m.cfg.Prefix):], 16, 32)
	if err != nil || int(slot) >= m.slots {
		return nil, fmt.Errorf("netns: %q is not a network of prefix %s in %s", name, m.cfg.Prefix, m.cfg.Subnet)
	}
	host, sb := m.addrs(int(slot))
	l := &Link{
		Slot:      int(slot),
		Name:      name,
		NSPath:    filepath.Join(m.cfg.Dir, name),
		HostIf:    name + "h",
		SandboxIf: "eth0",
		HostIP:    host,
		SandboxIP: sb,
	}
	if _, err := os.Stat(l.NSPath); err != nil {
		return nil, fmt.Errorf("netns: network %s has no namespace: %w", name, err)
	}
	if _, err := netlink.LinkByName(l.HostIf); err != nil {
		return nil, fmt.Errorf("netns: network %s has no host link: %w", name, err)
	}
	netdev, _, err := m.listTables()
	if err != nil {
		return nil, err
	}
	if !slices.Contains(netdev, name) {
		return nil, fmt.Errorf("netns: network %s has no rules", name)
	}
	m.mu.Lock()
	if m.used[l.Slot] {
		m.mu.Unlock()
		return nil, fmt.Errorf("netns: network %s is held already", name)
	}
	m.used[l.Slot] = true
	m.mu.Unlock()
	if err := m.ensureBase(); err != nil {
		m.free(l.Slot)
		return nil, err
	}
	return l, nil
}

// CheckClean reports anything of this prefix left on the host: links,
// tables and namespaces, held or not.
func (m *Manager) CheckClean() error {
	var left []string
	links, _ := netlink.LinkList()
	for _, l := range links {
		if m.ours(l.Attrs().Name) {
			left = append(left, "link "+l.Attrs().Name)
		}
	}
	netdev, ip, _ := m.listTables()
	for _, t := range netdev {
		if m.ours(t) {
			left = append(left, "nftables table netdev "+t)
		}
	}
	if slices.Contains(ip, m.cfg.Prefix) {
		left = append(left, "nftables table ip "+m.cfg.Prefix)
	}
	entries, _ := os.ReadDir(m.cfg.Dir)
	for _, e := range entries {
		if m.ours(e.Name()) {
			left = append(left, "namespace "+filepath.Join(m.cfg.Dir, e.Name()))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("netns: left on the host: %s", strings.Join(left, ", "))
	}
	return nil
}
