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

// The rules of one sandbox network live in two tables named after it, in
// the host's namespace (the sandbox's packets leave gVisor through a packet
// socket on the namespace's end of the link, so the host end is where the
// kernel's filters see them):
//
//	table netdev NAME { chain ingress (device NAME+"h", policy drop):
//	    arp accept
//	    ip6 -> counter ipv6, drop; any other non-IPv4 -> counter other, drop
//	    ip saddr != SANDBOX -> counter spoofed, drop
//	    ip daddr 169.254.0.0/16 (link-local, metadata) -> counter metadata, drop
//	    ip daddr HOST udp dport 53 -> counter dns, accept
//	    tcp -> counter tcp, accept (redirected below)
//	    everything else -> counter dropped, drop }
//	table ip NAME {
//	    prerouting (nat): DNS to HOST:53 -> redirect :DNSPort; all TCP -> redirect :ProxyPort
//	    input: from the link, only the proxy and resolver ports; else counter input, drop
//	    forward: nothing from or to the link is ever forwarded (counter forward, drop)
//	    output: to the link, only replies (established, related)
//	}

// Counter names.
const (
	CounterIPv6     = "ipv6"
	CounterOther    = "other"
	CounterSpoofed  = "spoofed"
	CounterMetadata = "metadata"
	CounterDNS      = "dns"
	CounterTCP      = "tcp"
	CounterDropped  = "dropped" // UDP other than DNS, ICMP and other IPv4 protocols
	CounterInput    = "input"
	CounterForward  = "forward"
)

var ingressCounters = []string{CounterIPv6, CounterOther, CounterSpoofed, CounterMetadata, CounterDNS, CounterTCP, CounterDropped}
var ipCounters = []string{CounterInput, CounterForward}

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

func seq(e ...expr.Any) []expr.Any { return e }

func (m *Manager) addRules(l *Link) error {
	c, err := conn()
	if err != nil {
		return err
	}
	host4, sb4 := l.HostIP.As4(), l.SandboxIP.As4()
	ipProto := meta(expr.MetaKeyPROTOCOL)
	nh := expr.PayloadBaseNetworkHeader
	th := expr.PayloadBaseTransportHeader

	// Ingress: every frame from the sandbox, before routing.
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
		seq(ipProto, cmp(expr.CmpOpEq, be16(unix.ETH_P_ARP)), verdict(expr.VerdictAccept)),
		seq(ipProto, cmp(expr.CmpOpEq, be16(unix.ETH_P_IPV6)), count(CounterIPv6), verdict(expr.VerdictDrop)),
		seq(ipProto, cmp(expr.CmpOpNeq, be16(unix.ETH_P_IP)), count(CounterOther), verdict(expr.VerdictDrop)),
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

	// IPv4 tables: redirect, and nothing else in or through.
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: l.Name})
	for _, n := range ipCounters {
		c.AddObj(&nftables.CounterObj{Table: t, Name: n})
	}
	iif := seq(meta(expr.MetaKeyIIFNAME), cmp(expr.CmpOpEq, ifname(l.HostIf)))
	oif := seq(meta(expr.MetaKeyOIFNAME), cmp(expr.CmpOpEq, ifname(l.HostIf)))
	join := func(parts ...[]expr.Any) []expr.Any {
		var out []expr.Any
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	redirect := func(port uint16) []expr.Any {
		return seq(&expr.Immediate{Register: 1, Data: be16(port)}, &expr.Redir{RegisterProtoMin: 1, Flags: unix.NF_NAT_RANGE_PROTO_SPECIFIED})
	}
	toHost53 := func(proto byte) []expr.Any {
		return seq(payload(nh, 16, 4), cmp(expr.CmpOpEq, host4[:]), meta(expr.MetaKeyL4PROTO), cmp(expr.CmpOpEq, []byte{proto}),
			payload(th, 2, 2), cmp(expr.CmpOpEq, be16(53)))
	}
	tcp := seq(meta(expr.MetaKeyL4PROTO), cmp(expr.CmpOpEq, []byte{unix.IPPROTO_TCP}))
	udp := seq(meta(expr.MetaKeyL4PROTO), cmp(expr.CmpOpEq, []byte{unix.IPPROTO_UDP}))
	dport := func(p uint16) []expr.Any { return seq(payload(th, 2, 2), cmp(expr.CmpOpEq, be16(p))) }

	pre := c.AddChain(&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
	c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: join(iif, toHost53(unix.IPPROTO_UDP), redirect(m.cfg.DNSPort))})
	c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: join(iif, toHost53(unix.IPPROTO_TCP), redirect(m.cfg.DNSPort))})
	c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: join(iif, tcp, redirect(m.cfg.ProxyPort))})

	input := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: t, Chain: input, Exprs: join(iif, tcp, dport(m.cfg.ProxyPort), seq(verdict(expr.VerdictAccept)))})
	c.AddRule(&nftables.Rule{Table: t, Chain: input, Exprs: join(iif, tcp, dport(m.cfg.DNSPort), seq(verdict(expr.VerdictAccept)))})
	c.AddRule(&nftables.Rule{Table: t, Chain: input, Exprs: join(iif, udp, dport(m.cfg.DNSPort), seq(verdict(expr.VerdictAccept)))})
	c.AddRule(&nftables.Rule{Table: t, Chain: input, Exprs: join(iif, seq(count(CounterInput), verdict(expr.VerdictDrop)))})

	fwd := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: join(iif, seq(count(CounterForward), verdict(expr.VerdictDrop)))})
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: join(oif, seq(count(CounterForward), verdict(expr.VerdictDrop)))})

	out := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: join(oif, seq(
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binary.NativeEndian.AppendUint32(nil, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED), Xor: []byte{0, 0, 0, 0}},
		cmp(expr.CmpOpNeq, []byte{0, 0, 0, 0}), verdict(expr.VerdictAccept)))})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: join(oif, seq(verdict(expr.VerdictDrop)))})

	if err := c.Flush(); err != nil {
		return fmt.Errorf("netns: add rules for %s: %w", l.Name, err)
	}
	return nil
}

// deleteRules deletes the tables of a sandbox network; missing tables are
// no error.
func (m *Manager) deleteRules(name string) error {
	c, err := conn()
	if err != nil {
		return err
	}
	tables, err := c.ListTables()
	if err != nil {
		return fmt.Errorf("netns: list tables: %w", err)
	}
	n := 0
	for _, t := range tables {
		if t.Name == name && (t.Family == nftables.TableFamilyNetdev || t.Family == nftables.TableFamilyIPv4) {
			c.DelTable(t)
			n++
		}
	}
	if n == 0 {
		return nil
	}
	if err := c.Flush(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netns: delete tables %s: %w", name, err)
	}
	return nil
}

func (m *Manager) listTables() ([]string, error) {
	c, err := conn()
	if err != nil {
		return nil, err
	}
	tables, err := c.ListTables()
	if err != nil {
		return nil, fmt.Errorf("netns: list tables: %w", err)
	}
	var out []string
	seen := map[string]bool{}
	for _, t := range tables {
		if !seen[t.Name] {
			seen[t.Name] = true
			out = append(out, t.Name)
		}
	}
	return out, nil
}

// Counters returns the packet counts of a sandbox network's rules by
// counter name (see the Counter constants).
func (m *Manager) Counters(l *Link) (map[string]uint64, error) {
	c, err := conn()
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyNetdev, nftables.TableFamilyIPv4} {
		objs, err := c.GetObjects(&nftables.Table{Family: fam, Name: l.Name})
		if err != nil {
			return nil, fmt.Errorf("netns: read counters of %s: %w", l.Name, err)
		}
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
	}
	return out, nil
}
