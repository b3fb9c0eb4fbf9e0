package airlock

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Network: a sandbox has no network unless its session asked for an
// allow list (or its one-shot execution set allow_network). A sandbox with
// a network gets its own network namespace whose only ways out are the
// node's egress proxy (every TCP connection) and its DNS resolver (UDP and
// TCP 53); the proxy and the resolver admit only what the allow list
// names. See package egress.

// Network modes of a session (NetworkPolicy.Mode).
const (
	NetworkNone      = "none"       // no network at all (runsc --network=none)
	NetworkAllowList = "allow_list" // the names of Allow, through the egress proxy
)

// MaxAllowEntries bounds an allow list.
const MaxAllowEntries = 256

// BrokerHost is the name sandbox code calls the credential broker by:
// http://broker.airlock.internal/<scope>/<path>. It is answered by the
// node, never looked up on the internet, and may not be in an allow list.
const BrokerHost = "broker.airlock.internal"

// NetworkPolicy is a session's network access.
type NetworkPolicy struct {
	Mode  string   `json:"mode"`            // none or allow_list
	Allow []string `json:"allow,omitempty"` // entries "host", "host:port", "*.domain[:port]"
}

// Validate checks the mode and the syntax of every allow-list entry.
func (p *NetworkPolicy) Validate() error {
	switch p.Mode {
	case "":
		return Problem(EINVALID, "invalid-network", "network.mode is required (\"none\" or \"allow_list\")")
	case NetworkNone:
		if len(p.Allow) > 0 {
			return Problem(EINVALID, "invalid-network", "network.allow is only for mode \"allow_list\"")
		}
		return nil
	case NetworkAllowList:
		_, err := ParseAllowList(p.Allow)
		return err
	}
	return Problem(EINVALID, "invalid-network", "unknown network mode %q (\"none\" or \"allow_list\")", p.Mode)
}

// HasNetwork reports whether the policy gives the sandbox a network.
func (p *NetworkPolicy) HasNetwork() bool { return p != nil && p.Mode == NetworkAllowList }

// AllowRule is one parsed allow-list entry.
//
//   - "api.example.com": that name exactly, HTTP on port 80 and TLS on
//     port 443 (the web ports; the protocol is recognised by the proxy);
//   - "api.example.com:8443": that name on that port only, any protocol
//     (TLS and HTTP are still matched by SNI and Host; anything else by
//     the name the sandbox looked up through the node's DNS);
//   - "*.example.com[:port]": every name below example.com (not
//     example.com itself), as above.
type AllowRule struct {
	Host     string // lower case, no trailing dot; for a wildcard the suffix without "*."
	Wildcard bool
	Port     int // 0: the web ports 80 and 443, HTTP and TLS only
}

// String is the rule in allow-list syntax.
func (r AllowRule) String() string {
	s := r.Host
	if r.Wildcard {
		s = "*." + s
	}
	if r.Port != 0 {
		s += ":" + strconv.Itoa(r.Port)
	}
	return s
}

// MatchesName reports whether the rule's host part covers name (already
// normalised with NormalizeHost).
func (r AllowRule) MatchesName(name string) bool {
	if !r.Wildcard {
		return name == r.Host
	}
	return len(name) > len(r.Host)+1 && strings.HasSuffix(name, r.Host) && name[len(name)-len(r.Host)-1] == '.'
}

// ParseAllowList parses and checks an allow list; errors are problems
// that name the bad entry.
func ParseAllowList(entries []string) ([]AllowRule, error) {
	if len(entries) > MaxAllowEntries {
		return nil, Problem(EINVALID, "invalid-allow-list", "an allow list has at most %d entries, not %d", MaxAllowEntries, len(entries))
	}
	rules := make([]AllowRule, 0, len(entries))
	for _, e := range entries {
		r, err := ParseAllowRule(e)
		if err != nil {
			return nil, Problem(EINVALID, "invalid-allow-list", "allow-list entry %q: %v", clip(e, 100), err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// ParseAllowRule parses one allow-list entry.
func ParseAllowRule(s string) (AllowRule, error) {
	var r AllowRule
	host := s
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if strings.Count(s, ":") > 1 {
			return r, errors.New("addresses are not allowed: name hosts, the proxy never trusts an address")
		}
		host = s[:i]
		p, err := strconv.Atoi(s[i+1:])
		if err != nil || p < 1 || p > 65535 || s[i+1:] != strconv.Itoa(p) {
			return r, errors.New("the port must be a number from 1 to 65535")
		}
		r.Port = p
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		r.Wildcard = true
		host = rest
	}
	if strings.Contains(host, "*") {
		return r, errors.New("a wildcard is allowed only as the first label (\"*.example.com\")")
	}
	name, ok := NormalizeHost(host)
	if !ok {
		if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
			return r, errors.New("addresses are not allowed: name hosts, the proxy never trusts an address")
		}
		return r, errors.New("not a valid host name")
	}
	if r.Wildcard && !strings.Contains(name, ".") {
		return r, errors.New("a wildcard must stand below a domain of at least two labels (\"*.example.com\", not \"*.com\")")
	}
	if name == BrokerHost || strings.HasSuffix(name, ".airlock.internal") || name == "airlock.internal" {
		return r, errors.New("names under airlock.internal are reserved for the node (the broker needs broker_scopes, not an allow-list entry)")
	}
	r.Host = name
	return r, nil
}

// NormalizeHost lower-cases a host name, drops one trailing dot and checks
// it: 1 to 253 characters, labels of 1 to 63 letters, digits, hyphens or
// underscores that neither start nor end with a hyphen. Address literals
// are not names and are refused.
func NormalizeHost(h string) (string, bool) {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return "", false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return "", false
	}
	b := []byte(h)
	labelStart := 0
	allDigits := true
	for i := 0; i <= len(b); i++ {
		if i == len(b) || b[i] == '.' {
			n := i - labelStart
			if n < 1 || n > 63 || b[labelStart] == '-' || b[i-1] == '-' {
				return "", false
			}
			labelStart = i + 1
			continue
		}
		c := b[i]
		switch {
		case c >= 'A' && c <= 'Z':
			b[i] = c + 'a' - 'A'
			allDigits = false
		case c >= 'a' && c <= 'z', c == '-', c == '_':
			allDigits = false
		case c >= '0' && c <= '9':
		default:
			return "", false
		}
	}
	if allDigits {
		return "", false // "1.2.3.4"-like forms that ParseAddr does not take (e.g. "10.1")
	}
	return string(b), true
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// ValidScopeName reports whether s can name a broker scope: 1 to 64
// letters, digits, '.', '_' or '-', starting with a letter or digit.
func ValidScopeName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return false
		}
	}
	return true
}

// Egress events: the audit log of a sandbox's network.

// Kinds of egress events.
const (
	EgressConnection = "connection" // a TCP connection through the proxy, or refused by it
	EgressDNS        = "dns"        // a DNS query to the node's resolver
	EgressBroker     = "broker"     // a call to the credential broker
	EgressDrops      = "drops"      // packets the namespace's rules dropped (counted, reported at exec end and teardown)
	EgressPolicy     = "policy"     // the allow list was replaced
)

// Verdicts of egress events.
const (
	VerdictAllowed = "allowed"
	VerdictDenied  = "denied"
	VerdictClosed  = "closed" // allowed, then cut (policy tightened, quota, session end)
	VerdictFailed  = "failed" // allowed, but the upstream could not be reached
)

// EgressEvent is one entry of a sandbox's egress audit log.
type EgressEvent struct {
	Seq         int64     `json:"seq"` // increasing; the cursor of the log
	TenantID    string    `json:"-"`
	SessionID   string    `json:"session_id,omitempty"`
	ExecutionID string    `json:"execution_id,omitempty"`
	Time        time.Time `json:"time"`
	Kind        string    `json:"kind"`
	// Protocol: tls, http or opaque for a connection; the query type (A,
	// AAAA, ...) for DNS; the HTTP method for a broker call.
	Protocol string `json:"protocol,omitempty"`
	// Name is the destination name the decision was made on: the SNI,
	// the Host, the name looked up, the broker scope.
	Name string `json:"name,omitempty"`
	Port int    `json:"port,omitempty"`
	SNI  string `json:"sni,omitempty"`
	Host string `json:"host,omitempty"` // the HTTP Host header
	// Dialled is the address the sandbox connected to (never trusted);
	// Resolved the address the proxy connected to, or the DNS answers.
	Dialled    string   `json:"dialled,omitempty"`
	Resolved   string   `json:"resolved,omitempty"`
	BytesUp    int64    `json:"bytes_up"`
	BytesDown  int64    `json:"bytes_down"`
	Verdict    string   `json:"verdict"`
	Reason     string   `json:"reason,omitempty"`
	Flags      []string `json:"flags,omitempty"` // e.g. long-label, high-entropy (DNS tunnelling)
	Detail     string   `json:"detail,omitempty"`
	DurationMS int64    `json:"duration_ms"`
}

// EgressFilter selects a page of an owner's egress log, newest first.
// Exactly one of SessionID and ExecutionID names the owner.
type EgressFilter struct {
	TenantID    string
	SessionID   string
	ExecutionID string
	Limit       int
	Before      int64  // cursor: list events with a smaller Seq
	Kind        string // optional
	Verdict     string // optional
}

// EgressPage is one page of an egress log, newest first. NextCursor, when
// set, is passed as ?before= for the next page.
type EgressPage struct {
	Events     []*EgressEvent `json:"events"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// EgressStore keeps the egress audit log.
type EgressStore interface {
	// RecordEgress appends events; Seq is assigned by the store.
	RecordEgress(ctx context.Context, events []*EgressEvent) error
	ListEgress(ctx context.Context, f EgressFilter) ([]*EgressEvent, error)
}

// Egress attaches sandboxes to the node's egress control. The egress
// package implements it.
type Egress interface {
	// Attach makes a sandbox's network: a namespace with rules that let
	// out only the proxy and the resolver, under the request's policy. The
	// sandbox is created with the returned attachment's Sandbox() and the
	// attachment is closed after the sandbox is destroyed.
	Attach(ctx context.Context, req NetworkRequest) (NetworkAttachment, error)
	// HasBrokerScope reports whether the operator configured a broker
	// scope of that name.
	HasBrokerScope(name string) bool
	// BrokerGranted checks that the tenant was granted the broker scope:
	// nil, a 403 problem ProblemBrokerScopeNotGranted, or the store's
	// error.
	BrokerGranted(ctx context.Context, tenantID, scope string) error
}

// NetworkReattacher is implemented by egress services that can take back,
// after a restart of the server, a network an earlier process made and
// left to a sandbox that lives on (a session's).
type NetworkReattacher interface {
	// ReattachNetwork finds the network named name (see
	// NetworkAttachment's Name) and serves it again under req.
	ReattachNetwork(ctx context.Context, name string, req NetworkRequest) (NetworkAttachment, error)
}

// NetworkRequest says whose network to make and under what policy.
type NetworkRequest struct {
	TenantID     string
	SessionID    string // one of SessionID and ExecutionID
	ExecutionID  string
	Policy       NetworkPolicy
	BrokerScopes []string
}

// NetworkAttachment is one sandbox's network.
type NetworkAttachment interface {
	// Sandbox says how to start the sandbox in the network.
	Sandbox() *SandboxNetwork
	// SetPolicy replaces the policy: new connections and queries follow
	// it at once, and open connections it denies are closed.
	SetPolicy(ctx context.Context, p NetworkPolicy) error
	// Attempts counts what the sandbox tried so far: connections (allowed
	// or not), DNS queries and packets the rules dropped.
	Attempts(ctx context.Context) int64
	// Close cuts every connection, records the dropped-packet counts and
	// removes the namespace, its link and its rules. Safe to call twice.
	Close(ctx context.Context) error
}

// SandboxNetwork is what a backend needs to start a sandbox in a network
// made for it (SandboxSpec.Network).
type SandboxNetwork struct {
	// NetNSPath is the network namespace (a bind-mounted nsfs file) the
	// sandbox's network stack runs in.
	NetNSPath string
	// ResolvConf is the content of the sandbox's /etc/resolv.conf.
	ResolvConf string
}

// SessionNetworkService is implemented by session services that run
// sessions with a network: live policy and the egress log.
type SessionNetworkService interface {
	// SetSessionNetwork replaces a live session's network policy.
	SetSessionNetwork(ctx context.Context, tenant *Tenant, id string, p NetworkPolicy) (*Session, error)
	// SessionEgress returns a page of the session's egress log.
	SessionEgress(ctx context.Context, tenant *Tenant, id string, f EgressFilter) (*EgressPage, error)
}

// BrokerCaller is who calls the credential broker: the sandbox a request
// came from, as the node knows it (never as the request claims).
type BrokerCaller struct {
	TenantID    string
	SessionID   string
	ExecutionID string
	Scopes      []string
}

// BrokerCall is one call sandbox code sent to BrokerHost, free of any
// transport: the egress proxy reads it off the sandbox's connection and
// the broker answers it through a BrokerReply.
type BrokerCall struct {
	// Caller is the sandbox the call came from, as the node knows it.
	Caller BrokerCaller
	Method string
	// Path is the decoded path (/<scope>/<path>); EscapedPath the path
	// as sent. RawQuery is the query without its "?".
	Path        string
	EscapedPath string
	RawQuery    string
	// Header holds the request's header fields (canonical names).
	Header map[string][]string
	// Body streams the request's body, nil when it has none;
	// ContentLength is its length, -1 when not known.
	Body          io.Reader
	ContentLength int64
}

// BrokerReply takes the broker's answer as it streams: Start once with
// the status and the header fields, then the body by Write. Each Write is
// passed on to the sandbox at once.
type BrokerReply interface {
	Start(status int, header map[string][]string)
	io.Writer
}

// Broker serves the credential broker's in-sandbox address. The broker
// package implements it; the egress proxy hands it the calls sandbox
// code sends to BrokerHost.
type Broker interface {
	HasScope(name string) bool
	// Granted checks that the tenant was granted the scope (see
	// Egress.BrokerGranted); Call checks it again at every call.
	Granted(ctx context.Context, tenantID, scope string) error
	// Call makes the call and writes its answer (the upstream's, or a
	// problem document of the broker's) to reply.
	Call(ctx context.Context, call *BrokerCall, reply BrokerReply)
}

// NetworkedSandbox is a sandbox with a network attachment (WithNetwork).
type NetworkedSandbox interface {
	Sandbox
	Network() NetworkAttachment
}

// WithNetwork joins a sandbox and its network: Destroy destroys the
// sandbox and then closes the network.
func WithNetwork(sb Sandbox, n NetworkAttachment) NetworkedSandbox {
	return &networked{Sandbox: sb, net: n}
}

type networked struct {
	Sandbox
	net NetworkAttachment
}

func (s *networked) Network() NetworkAttachment { return s.net }

var (
	_ Killer    = (*networked)(nil)
	_ CPUWaiter = (*networked)(nil)
)

// Kill ends the processes of the sandbox (Killer) and leaves its network
// for Destroy; a sandbox that cannot is destroyed.
func (s *networked) Kill(ctx context.Context) error {
	if k, ok := s.Sandbox.(Killer); ok {
		return k.Kill(ctx)
	}
	return s.Sandbox.Destroy(ctx)
}

// CPUWait is the sandbox's (CPUWaiter), 0 if it cannot tell.
func (s *networked) CPUWait(ctx context.Context) time.Duration {
	if w, ok := s.Sandbox.(CPUWaiter); ok {
		return w.CPUWait(ctx)
	}
	return 0
}

// Labels are the labels of the sandbox, if it reports them.
func (s *networked) Labels() map[string]string {
	if l, ok := s.Sandbox.(Labeled); ok {
		return l.Labels()
	}
	return nil
}

// Detach detaches the sandbox and leaves its network in place for the
// next server start (see Detacher); ErrCannotDetach if the sandbox cannot.
func (s *networked) Detach() error {
	d, ok := s.Sandbox.(Detacher)
	if !ok {
		return ErrCannotDetach
	}
	if nd, ok := s.net.(interface{ Detach() }); ok {
		nd.Detach()
	}
	return d.Detach()
}

func (s *networked) Destroy(ctx context.Context) error {
	err := s.Sandbox.Destroy(ctx)
	return errors.Join(err, s.net.Close(context.WithoutCancel(ctx)))
}

// NetworkOverQuota reports whether a networked sandbox has used its
// egress byte budget (its connections were cut, new ones are refused).
func NetworkOverQuota(sb Sandbox) bool {
	if n, ok := sb.(NetworkedSandbox); ok {
		if q, ok := n.Network().(interface{ OverQuota() bool }); ok {
			return q.OverQuota()
		}
	}
	return false
}

// NetworkAttempts returns the attempts of a networked sandbox so far, or 0
// for a sandbox without a network.
func NetworkAttempts(ctx context.Context, sb Sandbox) int64 {
	if n, ok := sb.(NetworkedSandbox); ok {
		return n.Network().Attempts(ctx)
	}
	return 0
}
