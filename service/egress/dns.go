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
	var src netip.Addr
	switch ra := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		src = ra.AddrPort().Addr().Unmap()
	case *net.TCPAddr:
		src = ra.AddrPort().Addr().Unmap()
	}
	a := s.lookup(src)
	if a == nil || a.isClosed() {
		w.Close() // not a sandbox: no answer at all (no open resolver)
		return
	}
	a.attempts.Add(1)
	start := time.Now()
	ev := a.event(airlock.EgressDNS)
	m := new(dns.Msg)
	m.SetReply(r)
	m.RecursionAvailable = true
	m.Compress = true
	answer := func(rcode int, verdict, reason string) {
		m.Rcode = rcode
		if opt := r.IsEdns0(); opt != nil {
			m.SetEdns0(dns.MinMsgSize, false)
		}
		w.WriteMsg(m)
		ev.Verdict, ev.Reason = verdict, reason
		ev.DurationMS = time.Since(start).Milliseconds()
		s.Record(ev)
	}
	if r.Opcode != dns.OpcodeQuery || len(r.Question) != 1 || r.Response {
		answer(dns.RcodeFormatError, airlock.VerdictDenied, "malformed-query")
		return
	}
	q := r.Question[0]
	ev.Protocol = dns.TypeToString[q.Qtype]
	if ev.Protocol == "" {
		ev.Protocol = fmt.Sprintf("TYPE%d", q.Qtype)
	}
	raw := strings.TrimSuffix(q.Name, ".")
	ev.Flags = TunnelFlags(raw)
	name, ok := airlock.NormalizeHost(raw)
	ev.Name = name
	if !ok {
		ev.Name = clipName(raw)
	}
	switch {
	case q.Qclass != dns.ClassINET:
		answer(dns.RcodeRefused, airlock.VerdictDenied, "not-internet-class")
		return
	case !ok:
		answer(dns.RcodeNameError, airlock.VerdictDenied, "invalid-name")
		return
	case name == airlock.BrokerHost:
		if len(a.req.BrokerScopes) == 0 || s.cfg.Broker == nil {
			answer(dns.RcodeNameError, airlock.VerdictDenied, "no-broker-scopes")
			return
		}
		if q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
				A:   net.IP(a.link.HostIP.AsSlice()),
			})
			ev.Resolved = a.link.HostIP.String()
		}
		answer(dns.RcodeSuccess, airlock.VerdictAllowed, "broker")
		return
	case !a.policy.Load().AdmitName(name):
		answer(dns.RcodeNameError, airlock.VerdictDenied, "not-in-allow-list")
		return
	}
	switch q.Qtype {
	case dns.TypeA:
	case dns.TypeAAAA:
		// Sandboxes have IPv4 only: no addresses, so that clients use A.
		answer(dns.RcodeSuccess, airlock.VerdictAllowed, "no-ipv6")
		return
	default:
		answer(dns.RcodeSuccess, airlock.VerdictDenied, "only-address-queries")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, ttl, err := s.resolver.Lookup(ctx, name, dns.TypeA)
	switch {
	case errors.Is(err, ErrNXDomain):
		answer(dns.RcodeNameError, airlock.VerdictAllowed, "no-such-name")
		return
	case err != nil:
		ev.Detail = err.Error()
		answer(dns.RcodeServerFailure, airlock.VerdictFailed, "resolve-failed")
		return
	}
	var good, bad []netip.Addr
	why := ""
	for _, ad := range addrs {
		if f, w := s.addrs.forbidden(ad); f {
			bad = append(bad, ad)
			why = ad.String() + " is a " + w
			continue
		}
		good = append(good, ad)
	}
	if len(good) == 0 && len(bad) > 0 {
		ev.Resolved = joinAddrs(bad)
		ev.Detail = why
		answer(dns.RcodeSuccess, airlock.VerdictDenied, "forbidden-address")
		return
	}
	t := uint32(min(int(ttl/time.Second), maxAnswerTTL))
	for _, ad := range good {
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: t},
			A:   net.IP(ad.AsSlice()),
		})
	}
	a.remember(name, good)
	ev.Resolved = joinAddrs(good)
	if len(bad) > 0 {
		ev.Detail = "left out: " + why
	}
	answer(dns.RcodeSuccess, airlock.VerdictAllowed, "")
}

func clipName(s string) string {
	if len(s) > 255 {
		return s[:255]
	}
	return s
}
