package netns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The rules live in the host's namespace (the sandbox's packets leave
// gVisor through a packet socket on the namespace's end of the link, so
// the host end is where the kernel's filters see them), in two kinds of
// table:
//
// One table per sandbox network, on the ingress of its host link, sees
// every frame before routing:
//
//	table netdev NAME { chain ingress (device NAME+"h", policy drop):
//	    arp accept
//	    ip6 -> counter dropped_ipv6, drop; other non-IPv4 -> counter dropped_other, drop
//	    ip saddr != SANDBOX -> counter dropped_spoofed, drop
//	    ip daddr 169.254.0.0/16 (link-local, metadata) -> counter dropped_metadata, drop
//	    ip daddr HOST udp dport 53 -> counter dns_packets, accept
//	    tcp -> counter tcp_packets, accept (redirected below)
//	    everything else -> counter dropped, drop }
//
// One table per manager (named after its prefix), shared by all its
// sandbox networks and kept while any exists, matches their links by the
// prefix:
//
//	table ip PREFIX {
//	    prerouting (nat): DNS (UDP and TCP 53) -> redirect :DNSPort; other TCP -> redirect :ProxyPort
//	    input: only the proxy and resolver ports; else counter input_dropped, drop
//	    forward: nothing from or to the links (counter forward_dropped, drop)
//	    output: to the links, only replies (established, related)
//	}
//
// Keeping the NAT rules in one long-lived table matters: the first NAT
// rule in a namespace turns conntrack's hooks on and the last one off,
// which took ~30 ms each time when every sandbox had its own.

// Counter names (of Counters).
const (
	CounterIPv6     = "dropped_ipv6"
	CounterOther    = "dropped_other"
	CounterSpoofed  = "dropped_spoofed"
	CounterMetadata = "dropped_metadata"
	CounterDNS      = "dns_packets"
	CounterTCP      = "tcp_packets"
	CounterDropped  = "dropped" // UDP other than DNS, ICMP and other IPv4 protocols
)

var ingressCounters = []string{CounterIPv6, CounterOther, CounterSpoofed, CounterMetadata, CounterDNS, CounterTCP, CounterDropped}

func conn() (*nftables.Conn, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("netns: nftables: %w", err)
	}
	return c, nil
}

func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

func cmp(op expr.CmpOp, data []byte) *expr.Cmp { return &expr.Cmp{Op: op, Register: 1, Data: data} }

func meta(k expr.MetaKey) *expr.Meta { return &expr.Meta{Key: k, Register: 1} }

func payload(base expr.PayloadBase, off, n uint32) *expr.Payload {
	return &expr.Payload{DestRegister: 1, Base: base, Offset: off, Len: n}
}

func count(name string) *expr.Objref {
	return &expr.Objref{Type: int(nftables.ObjTypeCounter), Name: name}
}

func verdict(k expr.VerdictKind) *expr.Verdict { return &expr.Verdict{Kind: k} }

func seq(parts ...any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		switch p := p.(type) {
		case expr.Any:
			out = append(out, p)
		case []expr.Any:
			out = append(out, p...)
		}
	}
	return out
}

// addRules adds the ingress table of one sandbox network.
func (m *Manager) addRules(l *Link) error {
	if err := m.ensureBase(); err != nil {
		return err
	}
	c, err := conn()
	if err != nil {
		return err
	}
	host4, sb4 := l.HostIP.As4(), l.SandboxIP.As4()
	proto := meta(expr.MetaKeyPROTOCOL)
	nh := expr.PayloadBaseNetworkHeader
	th := expr.PayloadBaseTransportHeader
	nd := c.AddTable(&nftables.Table{Family: nftables.TableFamilyNetdev, Name: l.Name})
	for _, n := range ingressCounters {
		c.AddObj(&nftables.CounterObj{Table: nd, Name: n})
	}
	drop := nftables.ChainPolicyDrop
	in := c.AddChain(&nftables.Chain{
		Name: "ingress", Table: nd, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookIngress, Priority: nftables.ChainPriorityFilter,
		Device: l.HostIf, Policy: &drop,
	})
	for _, r := range [][]expr.Any{
		seq(proto, cmp(expr.CmpOpEq, be16(unix.ETH_P_ARP)), verdict(expr.VerdictAccept)),
		seq(proto, cmp(expr.CmpOpEq, be16(unix.ETH_P_IPV6)), count(CounterIPv6), verdict(expr.VerdictDrop)),
		seq(proto, cmp(expr.CmpOpNeq, be16(unix.ETH_P_IP)), count(CounterOther), verdict(expr.VerdictDrop)),
		seq(payload(nh, 12, 4), cmp(expr.CmpOpNeq, sb4[:]), count(CounterSpoofed), verdict(expr.VerdictDrop)),
		seq(payload(nh, 16, 4),
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{255, 255, 0, 0}, Xor: []byte{0, 0, 0, 0}},
			cmp(expr.CmpOpEq, []byte{169, 254, 0, 0}), count(CounterMetadata), verdict(expr.VerdictDrop)),
		seq(payload(nh, 16, 4), cmp(expr.CmpOpEq, host4[:]), meta(expr.MetaKeyL4PROTO), cmp(expr.CmpOpEq, []byte{unix.IPPROTO_UDP}),
			payload(th, 2, 2), cmp(expr.CmpOpEq, be16(53)), count(CounterDNS), verdict(expr.VerdictAccept)),
		seq(meta(expr.MetaKeyL4PROTO), cmp(expr.CmpOpEq, []byte{unix.IPPROTO_TCP}), count(CounterTCP), verdict(expr.VerdictAccept)),
		seq(count(CounterDropped), verdict(expr.VerdictDrop)),
	} {
		c.AddRule(&nftables.Rule{Table: nd, Chain: in, Exprs: r})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("netns: add rules for %s: %w", l.Name, err)
	}
	return nil
}

// ensureBase makes the manager's shared table once (replacing one a
// crashed run left, whose ports may differ).
func (m *Manager) ensureBase() error {
	m.baseMu.Lock()
	defer m.baseMu.Unlock()
	if m.baseReady {
		return nil
	}
	c, err := conn()
	if err != nil {
		return err
	}
	// A table an earlier process left is replaced in the same transaction
	// as the new one is made: the networks it serves are never without
	// the forward and input rules.
	old, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return fmt.Errorf("netns: list tables: %w", err)
	}
	for _, t := range old {
		if t.Name == m.cfg.Prefix {
			c.DelTable(t)
		}
	}
	th := expr.PayloadBaseTransportHeader
	// Every link of this manager: the prefix, matched as nft's "alk*".
	ours := func(k expr.MetaKey) []expr.Any {
		return seq(meta(k), cmp(expr.CmpOpEq, []byte(m.cfg.Prefix)))
	}
	iif := ours(expr.MetaKeyIIFNAME)
	oif := ours(expr.MetaKeyOIFNAME)
	l4 := func(p byte) []expr.Any { return seq(meta(expr.MetaKeyL4PROTO), cmp(expr.CmpOpEq, []byte{p})) }
	dport := func(p uint16) []expr.Any { return seq(payload(th, 2, 2), cmp(expr.CmpOpEq, be16(p))) }
	redirect := func(port uint16) []expr.Any {
		return seq(&expr.Immediate{Register: 1, Data: be16(port)}, &expr.Redir{RegisterProtoMin: 1, Flags: unix.NF_NAT_RANGE_PROTO_SPECIFIED})
	}

	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: m.cfg.Prefix})
	c.AddObj(&nftables.CounterObj{Table: t, Name: "input_dropped"})
	c.AddObj(&nftables.CounterObj{Table: t, Name: "forward_dropped"})
	pre := c.AddChain(&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
	c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: seq(iif, l4(unix.IPPROTO_UDP), dport(53), redirect(m.cfg.DNSPort))})
	c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: seq(iif, l4(unix.IPPROTO_TCP), dport(53), redirect(m.cfg.DNSPort))})
	c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: seq(iif, l4(unix.IPPROTO_TCP), redirect(m.cfg.ProxyPort))})

	input := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: t, Chain: input, Exprs: seq(iif, l4(unix.IPPROTO_TCP), dport(m.cfg.ProxyPort), verdict(expr.VerdictAccept))})
	c.AddRule(&nftables.Rule{Table: t, Chain: input, Exprs: seq(iif, l4(unix.IPPROTO_TCP), dport(m.cfg.DNSPort), verdict(expr.VerdictAccept))})
	c.AddRule(&nftables.Rule{Table: t, Chain: input, Exprs: seq(iif, l4(unix.IPPROTO_UDP), dport(m.cfg.DNSPort), verdict(expr.VerdictAccept))})
	c.AddRule(&nftables.Rule{Table: t, Chain: input, Exprs: seq(iif, count("input_dropped"), verdict(expr.VerdictDrop))})

	fwd := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: seq(iif, count("forward_dropped"), verdict(expr.VerdictDrop))})
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: seq(oif, count("forward_dropped"), verdict(expr.VerdictDrop))})

	out := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: seq(oif,
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binary.NativeEndian.AppendUint32(nil, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED), Xor: []byte{0, 0, 0, 0}},
		cmp(expr.CmpOpNeq, []byte{0, 0, 0, 0}), verdict(expr.VerdictAccept))})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: seq(oif, verdict(expr.VerdictDrop))})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("netns: add the shared rules: %w", err)
	}
	m.baseReady = true
	return nil
}

// deleteRules deletes the ingress table of a sandbox network; a missing
// table is no error.
func (m *Manager) deleteRules(name string) error {
	return m.deleteTable(nftables.TableFamilyNetdev, name)
}

// deleteBase deletes the shared table.
func (m *Manager) deleteBase() error {
	m.baseMu.Lock()
	defer m.baseMu.Unlock()
	m.baseReady = false
	return m.deleteTable(nftables.TableFamilyIPv4, m.cfg.Prefix)
}

func (m *Manager) deleteTable(fam nftables.TableFamily, name string) error {
	c, err := conn()
	if err != nil {
		return err
	}
	tables, err := c.ListTablesOfFamily(fam)
	if err != nil {
		return fmt.Errorf("netns: list tables: %w", err)
	}
	for _, t := range tables {
		if t.Name == name {
			c.DelTable(t)
			if err := c.Flush(); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("netns: delete table %s: %w", name, err)
			}
			return nil
		}
	}
	return nil
}

// listTables lists the names of the netdev tables and of the ip tables.
func (m *Manager) listTables() (netdev, ip []string, err error) {
	c, err := conn()
	if err != nil {
		return nil, nil, err
	}
	tables, err := c.ListTables()
	if err != nil {
		return nil, nil, fmt.Errorf("netns: list tables: %w", err)
	}
	for _, t := range tables {
		switch t.Family {
		case nftables.TableFamilyNetdev:
			netdev = append(netdev, t.Name)
		case nftables.TableFamilyIPv4:
			ip = append(ip, t.Name)
		}
	}
	return netdev, ip, nil
}

// Counters returns the packet counts of a sandbox network's rules by
// counter name (see the Counter constants).
func (m *Manager) Counters(l *Link) (map[string]uint64, error) {
	c, err := conn()
	if err != nil {
		return nil, err
	}
	objs, err := c.GetObjects(&nftables.Table{Family: nftables.TableFamilyNetdev, Name: l.Name})
	if err != nil {
		return nil, fmt.Errorf("netns: read counters of %s: %w", l.Name, err)
	}
	out := map[string]uint64{}
	for _, o := range objs {
		switch o := o.(type) {
		case *nftables.CounterObj:
			out[o.Name] += o.Packets
		case *nftables.NamedObj:
			if ctr, ok := o.Obj.(*expr.Counter); ok {
				out[o.Name] += ctr.Packets
			}
		}
	}
	return out, nil
}
