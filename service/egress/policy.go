package egress

import (
	"github.com/airlockhq/airlock"
)

// Protocols the proxy tells apart.
const (
	ProtoTLS    = "tls"
	ProtoHTTP   = "http"
	ProtoOpaque = "opaque" // neither: matched by the name the sandbox looked up
)

// Policy is a parsed allow list.
type Policy struct {
	Mode  string
	Rules []airlock.AllowRule
}

// NewPolicy parses a network policy.
func NewPolicy(p airlock.NetworkPolicy) (*Policy, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	out := &Policy{Mode: p.Mode}
	if p.Mode == airlock.NetworkAllowList {
		rules, err := airlock.ParseAllowList(p.Allow)
		if err != nil {
			return nil, err
		}
		out.Rules = rules
	}
	return out, nil
}

// webPort reports whether port is one a rule without a port admits.
func webPort(port int, proto string) bool {
	return (proto == ProtoTLS || proto == ProtoHTTP) && (port == 80 || port == 443)
}

// Admit reports whether a connection to name (normalised) on port,
// recognised as proto, is allowed, and by which rule. A rule with a port
// admits that port and any protocol; a rule without one admits HTTP and
// TLS on ports 80 and 443.
func (p *Policy) Admit(name string, port int, proto string) (airlock.AllowRule, bool) {
	if p == nil {
		return airlock.AllowRule{}, false
	}
	for _, r := range p.Rules {
		if !r.MatchesName(name) {
			continue
		}
		if r.Port == port || r.Port == 0 && webPort(port, proto) {
			return r, true
		}
	}
	return airlock.AllowRule{}, false
}

// AdmitName reports whether any rule names name, whatever the port: the
// resolver answers such names.
func (p *Policy) AdmitName(name string) bool {
	if p == nil {
		return false
	}
	for _, r := range p.Rules {
		if r.MatchesName(name) {
			return true
		}
	}
	return false
}
