package rest

import (
	"net/http"
	"strconv"

	"github.com/airlockhq/airlock"
)

// sessionNetwork returns the session service's network side, or answers
// 501 when it has none.
func (s *Server) sessionNetwork(w http.ResponseWriter, r *http.Request) (airlock.SessionNetworkService, bool) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return nil, false
	}
	n, ok := svc.(airlock.SessionNetworkService)
	if !ok {
		s.error(w, r, errorf(airlock.ENOTIMPLEMENTED, "network-disabled", "sessions on this server have no network"))
		return nil, false
	}
	return n, true
}

// setSessionNetwork replaces a live session's network policy:
// PUT /v1/sessions/{id}/network with a NetworkPolicy. New connections
// follow it at once; open connections it denies are closed.
func (s *Server) setSessionNetwork(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessionNetwork(w, r)
	if !ok {
		return
	}
	var p airlock.NetworkPolicy
	if !s.decodeBody(w, r, &p) {
		return
	}
	sess, err := svc.SetSessionNetwork(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), p)
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, sess)
}

// egressKinds and egressVerdicts are the filter values GET .../egress
// takes.
var (
	egressKinds    = []string{airlock.EgressConnection, airlock.EgressDNS, airlock.EgressBroker, airlock.EgressDrops, airlock.EgressPolicy, airlock.EgressPreview}
	egressVerdicts = []string{airlock.VerdictAllowed, airlock.VerdictDenied, airlock.VerdictClosed, airlock.VerdictFailed}
)

func oneOf(v string, set []string) bool {
	for _, x := range set {
		if v == x {
			return true
		}
	}
	return false
}

// egressFilter reads the query of GET .../egress: limit, before, kind
// and verdict. It answers the problem itself when one is invalid.
func (s *Server) egressFilter(w http.ResponseWriter, r *http.Request) (airlock.EgressFilter, bool) {
	q := r.URL.Query()
	f := airlock.EgressFilter{Limit: DefaultPageLimit, Kind: q.Get("kind"), Verdict: q.Get("verdict")}
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageLimit {
			s.error(w, r, errorf(airlock.EINVALID, "invalid-limit", "limit must be a whole number from 1 to %d", MaxPageLimit))
			return f, false
		}
		f.Limit = n
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			s.error(w, r, errorf(airlock.EINVALID, "invalid-cursor", "before is not a cursor this API returned"))
			return f, false
		}
		f.Before = n
	}
	if f.Kind != "" && !oneOf(f.Kind, egressKinds) {
		s.error(w, r, errorf(airlock.EINVALID, "invalid-filter", "kind must be one of connection, dns, broker, drops, policy"))
		return f, false
	}
	if f.Verdict != "" && !oneOf(f.Verdict, egressVerdicts) {
		s.error(w, r, errorf(airlock.EINVALID, "invalid-filter", "verdict must be one of allowed, denied, closed, failed"))
		return f, false
	}
	return f, true
}

// sessionEgress pages through a session's egress audit log, newest first:
// GET /v1/sessions/{id}/egress?limit=&before=&kind=&verdict=.
func (s *Server) sessionEgress(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessionNetwork(w, r)
	if !ok {
		return
	}
	f, ok := s.egressFilter(w, r)
	if !ok {
		return
	}
	page, err := svc.SessionEgress(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), f)
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// egressLog is where the egress log of one-shot runs is read: EgressLog,
// else the store if it keeps the log too; nil if neither.
func (s *Server) egressLog() airlock.EgressStore {
	if s.cfg.EgressLog != nil {
		return s.cfg.EgressLog
	}
	l, _ := s.cfg.Store.(airlock.EgressStore)
	return l
}

// executionEgress pages through a one-shot run's egress audit log, newest
// first, as sessionEgress does a session's:
// GET /v1/executions/{id}/egress?limit=&before=&kind=&verdict=. Another
// tenant's execution is 404, like a missing one; a run without a network
// has an empty log. The events of a run in a session are in the
// session's log.
func (s *Server) executionEgress(w http.ResponseWriter, r *http.Request) {
	tenant, id := TenantFrom(r.Context()), r.PathValue("id")
	f, ok := s.egressFilter(w, r)
	if !ok {
		return
	}
	if _, err := s.cfg.Store.Execution(r.Context(), tenant.ID, id); airlock.ErrorCode(err) == airlock.ENOTFOUND {
		s.error(w, r, airlock.Problem(airlock.ENOTFOUND, "", "execution %q not found", id))
		return
	} else if err != nil {
		s.error(w, r, err)
		return
	}
	page := &airlock.EgressPage{Events: []*airlock.EgressEvent{}}
	if l := s.egressLog(); l != nil {
		f.TenantID, f.SessionID, f.ExecutionID = tenant.ID, "", id
		evs, err := l.ListEgress(r.Context(), f)
		if err != nil {
			s.error(w, r, err)
			return
		}
		page.Events = evs
		if len(evs) == f.Limit {
			page.NextCursor = strconv.FormatInt(evs[len(evs)-1].Seq, 10)
		}
	}
	s.writeJSON(w, r, http.StatusOK, page)
}
