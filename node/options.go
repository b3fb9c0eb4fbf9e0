package node

import (
	"net/http"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/service/image"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/quota"
	"github.com/airlockhq/airlock/service/session"
)

// An Option replaces a part the node would otherwise make from its
// Config with one the caller made. airlockd passes none; tests use them
// to build a node around parts of their own (a backend with a cgroup
// parent of the test's, a store shared with a test's egress service).
// What the caller passes in, the caller closes.
type Option func(*parts)

// parts are the Options given to New.
type parts struct {
	backends        []airlock.Backend
	images          *image.Store
	store           Store
	quotas          *quota.Ledger
	egress          airlock.Egress
	egressLog       airlock.EgressStore
	networkAllow    func(*airlock.Tenant) []string
	watchdog        airlock.Watchdog
	quarantines     provision.Quarantines
	session         func(*session.Config)
	rest            func(*rest.Config)
	wrapSessions    func(airlock.SessionService) airlock.SessionService
	frontDoor       func(n *Node, api http.Handler) http.Handler
	fleetAuth       fleet.Authenticator
	noDefaultTenant bool
	noRecovery      bool
}

// WithBackends makes the node offer these backends (the first is the
// default) instead of gVisor and those Config asks for.
func WithBackends(b ...airlock.Backend) Option {
	return func(p *parts) { p.backends = b }
}

// WithImages makes the node take its images from s instead of the state
// directory's images/.
func WithImages(s *image.Store) Option { return func(p *parts) { p.images = s } }

// WithStore makes the node keep its records in s instead of opening the
// store Config names.
func WithStore(s Store) Option { return func(p *parts) { p.store = s } }

// WithQuotas makes the node count tenants' use in l instead of a ledger
// of its own.
func WithQuotas(l *quota.Ledger) Option { return func(p *parts) { p.quotas = l } }

// WithEgress gives the sandboxes' networks to eg, whose connections are
// logged in log, instead of an egress proxy of the node's own (set
// Config.Egress.Disabled). allow is the tenants' default allow list for
// one-shot runs with allow_network.
func WithEgress(eg airlock.Egress, log airlock.EgressStore, allow func(*airlock.Tenant) []string) Option {
	return func(p *parts) { p.egress, p.egressLog, p.networkAllow = eg, log, allow }
}

// WithWatchdog makes the runner report to w instead of the node's abuse
// monitor.
func WithWatchdog(w airlock.Watchdog) Option { return func(p *parts) { p.watchdog = w } }

// WithQuarantines makes admission ask q whether a tenant is quarantined
// instead of the store.
func WithQuarantines(q provision.Quarantines) Option {
	return func(p *parts) { p.quarantines = q }
}

// WithSessionConfig lets f adjust the session manager's config before
// the manager is made.
func WithSessionConfig(f func(*session.Config)) Option {
	return func(p *parts) { p.session = f }
}

// WithRESTConfig lets f adjust the HTTP API's config before the API is
// made.
func WithRESTConfig(f func(*rest.Config)) Option {
	return func(p *parts) { p.rest = f }
}

// WithSessionService makes the REST API serve wrap(sessions) instead of
// the sessions behind the node's watch service.
func WithSessionService(wrap func(airlock.SessionService) airlock.SessionService) Option {
	return func(p *parts) { p.wrapSessions = wrap }
}

// WithFrontDoor makes the listener serve f(n, api), given the node (made
// but for its listener) and the REST API's handler, instead of the REST
// API with /mcp and /console beside it.
func WithFrontDoor(f func(n *Node, api http.Handler) http.Handler) Option {
	return func(p *parts) { p.frontDoor = f }
}

// WithoutDefaultTenant leaves an empty store empty: no tenant "default"
// and no default.key, no operator key and no admin.key.
func WithoutDefaultTenant() Option { return func(p *parts) { p.noDefaultTenant = true } }

// WithFleetAuthenticator makes the fleet learn a client's tenant from a
// instead of the REST API's keys.
func WithFleetAuthenticator(a fleet.Authenticator) Option {
	return func(p *parts) { p.fleetAuth = a }
}

// WithoutRecovery starts the node without taking back what an earlier run
// left (its sessions, sandboxes, networks and interrupted runs): for a
// test that runs the recovery itself and checks what it did.
func WithoutRecovery() Option { return func(p *parts) { p.noRecovery = true } }
