package egress

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/netns"
)

// attempt is one connection from a sandbox on its way through the proxy:
// what the proxy has learnt of it so far, and the audit event it ends in.
// Its steps run in order: identify, admit, connect, forward; the first
// that refuses ends it.
type attempt struct {
	s     *Service
	a     *attachment
	c     *net.TCPConn
	ev    *airlock.EgressEvent
	start time.Time

	port  int      // the destination port the sandbox dialled
	head  []byte   // what the sandbox sent first, read to tell its protocol
	proto string   // ProtoTLS, ProtoHTTP or ProtoOpaque
	hh    HTTPHead // the first request's head, for ProtoHTTP
	name  string   // the name the connection is for
}

// end records the attempt's event with a verdict and resets the client.
func (at *attempt) end(verdict, reason, detail string) {
	at.ev.Verdict, at.ev.Reason, at.ev.Detail = verdict, reason, detail
	at.ev.DurationMS = time.Since(at.start).Milliseconds()
	reset(at.c)
	at.s.Record(at.ev)
}

// deny refuses the connection.
func (at *attempt) deny(reason, detail string) {
	at.end(airlock.VerdictDenied, reason, detail)
}

// identify finds where the connection was going and which name it is
// for: the server name of a TLS ClientHello, the Host of an HTTP request,
// or, for any other protocol, the name the sandbox's resolver handed the
// address out for. reason is "" when it found one; else it says why the
// connection is refused.
func (at *attempt) identify() (reason, detail string) {
	od, err := netns.OriginalDst(at.c)
	if err != nil {
		return "no-original-destination", err.Error()
	}
	at.ev.Dialled, at.ev.Port = od.String(), int(od.Port())
	at.port = at.ev.Port

	head, proto, sni, hh, perr := at.s.sniff(at.c)
	at.head, at.proto, at.hh = head, proto, hh
	at.ev.Protocol = proto
	if proto == ProtoOpaque && LooksLikeStratum(head) {
		at.ev.Flags = append(at.ev.Flags, FlagStratum)
	}
	switch proto {
	case ProtoTLS:
		if perr != nil {
			return tlsReason(perr), perr.Error()
		}
		at.ev.SNI, at.name = sni, sni
		if sni == "" {
			return "no-sni", "a TLS ClientHello without a server name (connecting to an address?) is never allowed"
		}
	case ProtoHTTP:
		if perr != nil {
			return httpReason(perr), perr.Error()
		}
		at.ev.Host, at.name = hh.Host, hh.Host
		if hh.Port != 0 {
			at.ev.Host += ":" + strconv.Itoa(hh.Port)
			if hh.Port != at.port {
				return "host-port-mismatch", fmt.Sprintf("Host names port %d, the connection is to port %d", hh.Port, at.port)
			}
		}
	default:
		at.name = at.a.nameFor(od.Addr())
		if at.name == "" {
			return "protocol-not-allowed", "neither TLS nor HTTP, and the address was not handed out by the sandbox's resolver"
		}
	}
	at.ev.Name = at.name
	return "", ""
}

// toBroker hands a connection to the broker's name to the broker, when
// it is plain HTTP and the sandbox holds broker scopes.
func (at *attempt) toBroker() {
	switch {
	case at.proto != ProtoHTTP:
		at.deny("broker-http-only", "the broker is served over plain HTTP inside the node: http://"+airlock.BrokerHost+"/<scope>/<path>")
	case len(at.a.req.BrokerScopes) == 0 || at.s.cfg.Broker == nil:
		at.deny("no-broker-scopes", "the sandbox holds no broker scopes")
	default:
		at.s.serveBroker(at.a, at.c, at.head, at.ev, at.start)
	}
}

// admit checks the name, port and protocol against the sandbox's allow
// list, and the sandbox's and its tenant's egress quotas. reason is ""
// when the connection may go on.
func (at *attempt) admit() (reason, detail string) {
	pol := at.a.policy.Load()
	if _, ok := pol.Admit(at.name, at.port, at.proto); !ok {
		if at.proto == ProtoOpaque && pol.AdmitName(at.name) {
			return "protocol-not-allowed", fmt.Sprintf("%s is listed for HTTP and TLS only; other protocols need an entry that names port %d", at.name, at.port)
		}
		return "not-in-allow-list", fmt.Sprintf("%s port %d is not in the allow list", at.name, at.port)
	}
	if at.a.overQuota.Load() {
		return "quota-exceeded", "the sandbox used its egress quota"
	}
	if at.a.tenantLeft() <= 0 {
		return ReasonTenantQuota, "the tenant used its egress bytes of the day (quota egress_bytes_per_day)"
	}
	return "", ""
}

// connect resolves the name to addresses outside the forbidden ranges and
// dials the first that answers. It returns nil when the attempt ended:
// denied when no address is left, failed when none answered.
func (at *attempt) connect(ctx context.Context) *net.TCPConn {
	addrs, reason, detail := at.s.resolveAllowed(ctx, at.name)
	if reason != "" {
		at.ev.Resolved = detail
		at.deny(reason, fmt.Sprintf("%s: %s", at.name, detail))
		return nil
	}
	up, err := at.s.dial(ctx, addrs, at.port)
	if err != nil {
		at.ev.Resolved = joinAddrs(addrs)
		at.end(airlock.VerdictFailed, "upstream-unreachable", err.Error())
		return nil
	}
	at.ev.Resolved = up.RemoteAddr().String()
	return up
}

// forward relays the connection to up until either side ends it or the
// proxy cuts it, and records its event: allowed, or closed with the
// reason of the cut. A plain-HTTP request the relay refused midway gets
// an event of its own.
func (at *attempt) forward(up *net.TCPConn) {
	a := at.a
	pc := &proxyConn{a: a, client: at.c, upstream: up, name: at.name, port: at.port, proto: at.proto}
	if !a.addConn(pc) {
		up.Close()
		at.deny("sandbox-ended", "")
		return
	}
	// A policy replaced between admit and the registration would have
	// missed this connection: check again.
	if _, ok := a.policy.Load().Admit(at.name, at.port, at.proto); !ok {
		pc.cut("policy-changed")
	}
	var refused *refusal
	if at.proto == ProtoHTTP {
		refused = pc.relayHTTP(at.head, at.hh)
	} else {
		pc.relay(at.head)
	}
	a.removeConn(pc)
	if refused != nil {
		// The refused request gets an event of its own, as a refused
		// first request would.
		ev := at.ev
		rev := a.event(airlock.EgressConnection)
		rev.Protocol, rev.Dialled, rev.Port, rev.Resolved = at.proto, ev.Dialled, ev.Port, ev.Resolved
		rev.Name, rev.Host = refused.head.Host, refused.hostHd
		rev.Verdict, rev.Reason, rev.Detail = airlock.VerdictDenied, refused.reason, refused.detail
		at.s.Record(rev)
	}
	at.ev.BytesUp, at.ev.BytesDown = pc.up.Load(), pc.down.Load()
	at.ev.DurationMS = time.Since(at.start).Milliseconds()
	at.ev.Verdict = airlock.VerdictAllowed
	if r := pc.cutReason(); r != "" {
		at.ev.Verdict, at.ev.Reason = airlock.VerdictClosed, r
	}
	at.s.Record(at.ev)
}
