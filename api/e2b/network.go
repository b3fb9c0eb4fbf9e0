package e2b

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/airlockhq/airlock"
)

// networkConfig is E2B's network section (create) and the body of PUT
// /sandboxes/{id}/network. Fields Airlock does not act on (rules,
// egressProxy, allowPublicTraffic, maskRequestHost, httpsPorts) are
// accepted and ignored.
type networkConfig struct {
	AllowOut            []string `json:"allowOut"`
	DenyOut             []string `json:"denyOut"`
	AllowInternetAccess *bool    `json:"allow_internet_access"`
}

// everything is how E2B names the whole internet in allowOut and denyOut.
func everything(e string) bool { return e == "0.0.0.0/0" || e == "::/0" || e == "*" }

// isAddress reports whether e names addresses rather than a host.
func isAddress(e string) bool {
	if _, err := netip.ParsePrefix(e); err == nil {
		return true
	}
	_, err := netip.ParseAddr(strings.Trim(e, "[]"))
	return err == nil
}

// policyFor maps E2B's network request onto a session's policy, within
// the tenant's: Airlock lets a sandbox reach only the names on its allow
// list, never addresses, so
//
//   - allowOut names go on the list; "0.0.0.0/0" stands for the
//     tenant's default list (the internet as the operator allows it);
//     other addresses are refused (400);
//   - allow_internet_access (true when absent, as in E2B) adds the
//     tenant's default list unless denyOut holds "0.0.0.0/0";
//   - other denyOut names are taken off the list; denyOut addresses are
//     refused anyway.
//
// The result has no network unless the list is non-empty or the request
// named a network section (explicit: it may be changed later).
func (s *Server) policyFor(t *airlock.Tenant, internet *bool, n *networkConfig) (airlock.NetworkPolicy, error) {
	var allow, deny []string
	denyAll, allowAll := false, false
	if n != nil {
		if len(n.AllowOut)+len(n.DenyOut) > 256 {
			return airlock.NetworkPolicy{}, errorf(400, "network: at most 256 allowOut and denyOut entries")
		}
		for _, e := range n.AllowOut {
			e = strings.TrimSpace(e)
			switch {
			case everything(e):
				allowAll = true
			case isAddress(e):
				return airlock.NetworkPolicy{}, errorf(400, fmt.Sprintf("network.allowOut %q: Airlock's allow lists name hosts (host, host:port, *.domain), not addresses", clip(e, 100)))
			case e != "":
				allow = append(allow, e)
			}
		}
		for _, e := range n.DenyOut {
			e = strings.TrimSpace(e)
			switch {
			case everything(e):
				denyAll = true
			case !isAddress(e) && e != "":
				deny = append(deny, e)
			}
		}
	}
	if (internet == nil || *internet) && !denyAll || allowAll {
		if s.cfg.NetworkAllow != nil {
			allow = append(allow, s.cfg.NetworkAllow(t)...)
		}
	}
	allow = slices.DeleteFunc(allow, func(e string) bool { return slices.Contains(deny, e) })
	slices.Sort(allow)
	allow = slices.Compact(allow)
	if len(allow) == 0 && n == nil {
		return airlock.NetworkPolicy{Mode: airlock.NetworkNone}, nil
	}
	p := airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: allow}
	if err := p.Validate(); err != nil {
		return airlock.NetworkPolicy{}, errorf(400, airlock.ErrorMessage(err))
	}
	return p, nil
}
