package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/airlockhq/airlock"
)

const (
	typeA    = dns.TypeA
	typeAAAA = dns.TypeAAAA
)

// maxAnswerTTL caps the TTL the sandbox resolver hands out, so that a
// policy change or a changed upstream is seen soon.
const maxAnswerTTL = 60

// listenDNS opens the resolver's UDP and TCP listeners on one port.
func (s *Service) listenDNS() error {
	ip := net.IP(s.cfg.ListenAddr.AsSlice())
	var errs []error
	for attempt := 0; attempt < 20; attempt++ {
		pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: ip, Port: s.cfg.DNSPort})
		if err != nil {
			return fmt.Errorf("egress: resolver listener: %w", err)
		}
		port := pc.LocalAddr().(*net.UDPAddr).Port
		ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: ip, Port: port})
		if err != nil {
			pc.Close()
			errs = append(errs, err)
			if s.cfg.DNSPort != 0 {
				break
			}
			continue // the free UDP port is taken for TCP: try another
		}
		h := dns.HandlerFunc(s.serveDNS)
		s.dnsUDP = &dns.Server{PacketConn: pc, Handler: h, UDPSize: dns.MinMsgSize}
		s.dnsTCP = &dns.Server{Listener: ln, Handler: h, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, MaxTCPQueries: 64}
		return nil
	}
	return fmt.Errorf("egress: resolver listener: %w", errors.Join(errs...))
}

// serveDNS answers a sandbox's query: names the allow list admits are
// resolved upstream (addresses in forbidden ranges left out), the broker's
// name is the host end of the sandbox's link, anything else is NXDOMAIN
// and never leaves the node. Every query is logged.
func (s *Service) serveDNS(w dns.ResponseWriter, r *dns.Msg) {
	a := s.lookup(remoteIP(w))
	if a == nil || a.isClosed() {
		w.Close() // not a sandbox: no answer at all (no open resolver)
		return
	}
	a.attempts.Add(1)
	d := &dnsReply{s: s, a: a, w: w, r: r, ev: a.event(airlock.EgressDNS), start: time.Now(), m: new(dns.Msg)}
	d.m.SetReply(r)
	d.m.RecursionAvailable = true
	d.m.Compress = true
	if r.Opcode != dns.OpcodeQuery || len(r.Question) != 1 || r.Response {
		d.answer(dns.RcodeFormatError, airlock.VerdictDenied, "malformed-query")
		return
	}
	q := r.Question[0]
	name, ok := d.describe(q)
	switch {
	case q.Qclass != dns.ClassINET:
		d.answer(dns.RcodeRefused, airlock.VerdictDenied, "not-internet-class")
		return
	case !ok:
		d.answer(dns.RcodeNameError, airlock.VerdictDenied, "invalid-name")
		return
	case name == airlock.BrokerHost:
		d.answerBroker(q)
		return
	case !a.policy.Load().AdmitName(name):
		d.answer(dns.RcodeNameError, airlock.VerdictDenied, "not-in-allow-list")
		return
	}
	switch q.Qtype {
	case dns.TypeA:
		d.resolve(q, name)
	case dns.TypeAAAA:
		// Sandboxes have IPv4 only: no addresses, so that clients use A.
		d.answer(dns.RcodeSuccess, airlock.VerdictAllowed, "no-ipv6")
	default:
		d.answer(dns.RcodeSuccess, airlock.VerdictDenied, "only-address-queries")
	}
}

// remoteIP is the address a query came from.
func remoteIP(w dns.ResponseWriter) netip.Addr {
	switch ra := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		return ra.AddrPort().Addr().Unmap()
	case *net.TCPAddr:
		return ra.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// dnsReply is the answer to one query of a sandbox's, and the audit event
// it ends in.
type dnsReply struct {
	s     *Service
	a     *attachment
	w     dns.ResponseWriter
	r     *dns.Msg // the query
	m     *dns.Msg // the reply
	ev    *airlock.EgressEvent
	start time.Time
}

// answer sends the reply with rcode and records the event.
func (d *dnsReply) answer(rcode int, verdict, reason string) {
	d.m.Rcode = rcode
	if opt := d.r.IsEdns0(); opt != nil {
		d.m.SetEdns0(dns.MinMsgSize, false)
	}
	d.w.WriteMsg(d.m)
	d.ev.Verdict, d.ev.Reason = verdict, reason
	d.ev.DurationMS = time.Since(d.start).Milliseconds()
	d.s.Record(d.ev)
}

// describe puts the question's type, name and tunnelling flags in the
// event, and returns the name normalised; ok is false when it is no valid
// host name.
func (d *dnsReply) describe(q dns.Question) (name string, ok bool) {
	d.ev.Protocol = dns.TypeToString[q.Qtype]
	if d.ev.Protocol == "" {
		d.ev.Protocol = fmt.Sprintf("TYPE%d", q.Qtype)
	}
	raw := strings.TrimSuffix(q.Name, ".")
	d.ev.Flags = TunnelFlags(raw)
	name, ok = airlock.NormalizeHost(raw)
	d.ev.Name = name
	if !ok {
		d.ev.Name = clipName(raw)
	}
	return name, ok
}

// answerBroker answers for the broker's name: the host end of the
// sandbox's link, when the sandbox holds broker scopes.
func (d *dnsReply) answerBroker(q dns.Question) {
	if len(d.a.req.BrokerScopes) == 0 || d.s.cfg.Broker == nil {
		d.answer(dns.RcodeNameError, airlock.VerdictDenied, "no-broker-scopes")
		return
	}
	if q.Qtype == dns.TypeA {
		d.m.Answer = append(d.m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
			A:   net.IP(d.a.link.HostIP.AsSlice()),
		})
		d.ev.Resolved = d.a.link.HostIP.String()
	}
	d.answer(dns.RcodeSuccess, airlock.VerdictAllowed, "broker")
}

// resolve answers an A query for an allowed name with its addresses
// upstream, less those in the forbidden ranges, and remembers them as
// the name's for the proxy.
func (d *dnsReply) resolve(q dns.Question, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, ttl, err := d.s.resolver.Lookup(ctx, name, dns.TypeA)
	switch {
	case errors.Is(err, ErrNXDomain):
		d.answer(dns.RcodeNameError, airlock.VerdictAllowed, "no-such-name")
		return
	case err != nil:
		d.ev.Detail = err.Error()
		d.answer(dns.RcodeServerFailure, airlock.VerdictFailed, "resolve-failed")
		return
	}
	var good, bad []netip.Addr
	why := ""
	for _, ad := range addrs {
		if f, w := d.s.addrs.forbidden(ad); f {
			bad = append(bad, ad)
			why = ad.String() + " is a " + w
			continue
		}
		good = append(good, ad)
	}
	if len(good) == 0 && len(bad) > 0 {
		d.ev.Resolved = joinAddrs(bad)
		d.ev.Detail = why
		d.answer(dns.RcodeSuccess, airlock.VerdictDenied, "forbidden-address")
		return
	}
	t := uint32(min(int(ttl/time.Second), maxAnswerTTL))
	for _, ad := range good {
		d.m.Answer = append(d.m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: t},
			A:   net.IP(ad.AsSlice()),
		})
	}
	d.a.remember(name, good)
	d.ev.Resolved = joinAddrs(good)
	if len(bad) > 0 {
		d.ev.Detail = "left out: " + why
	}
	d.answer(dns.RcodeSuccess, airlock.VerdictAllowed, "")
}

func clipName(s string) string {
	if len(s) > 255 {
		return s[:255]
	}
	return s
}
