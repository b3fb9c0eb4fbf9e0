package airlock

import "strings"

// Isolation is how strongly a backend separates code from the host, from
// weakest to strongest. A backend's level follows from its Capabilities.
type Isolation string

const (
	// IsolationContainer: the code runs on the host's kernel, confined
	// by namespaces, seccomp, Landlock and cgroups (the namespaces
	// backend). For first-party code only.
	IsolationContainer Isolation = "container"
	// IsolationKernel: a separate kernel in user space answers the
	// code's syscalls (gVisor).
	IsolationKernel Isolation = "kernel"
	// IsolationVM: a guest kernel under a hypervisor (a microVM).
	IsolationVM Isolation = "vm"
)

// Isolations lists the levels from weakest to strongest.
var Isolations = []Isolation{IsolationContainer, IsolationKernel, IsolationVM}

// Valid reports whether i is a known level.
func (i Isolation) Valid() bool { return i.rank() > 0 }

func (i Isolation) rank() int {
	for n, x := range Isolations {
		if i == x {
			return n + 1
		}
	}
	return 0
}

// AtLeast reports whether i is as strong as floor or stronger.
func (i Isolation) AtLeast(floor Isolation) bool { return i.rank() >= floor.rank() }

// Isolation is the level a backend with these capabilities gives.
func (c Capabilities) Isolation() Isolation {
	switch {
	case c.HardwareIsolation:
		return IsolationVM
	case c.SeparateKernel:
		return IsolationKernel
	}
	return IsolationContainer
}

// IsolationFloor is the weakest isolation the tenant's code may run
// under. Tenants are untrusted unless an operator marked them first-party
// ("airlock tenant set NAME --first-party"): their code only ever runs
// behind a separate kernel (gVisor, a microVM). First-party tenants may
// also use the container level, for code that never runs model-chosen
// input. An operator may raise a tenant's floor (Tenant.Isolation,
// "airlock tenant set NAME --isolation vm"); the floor is the stronger of
// the two, so a setting never lowers it.
func (t *Tenant) IsolationFloor() Isolation {
	floor := IsolationKernel
	if t != nil && t.FirstParty {
		floor = IsolationContainer
	}
	if t != nil && t.Isolation.Valid() && t.Isolation.rank() > floor.rank() {
		floor = t.Isolation
	}
	return floor
}

// Problem types of isolation choices.
const (
	ProblemUnknownIsolation     = "unknown-isolation"
	ProblemIsolationNotAllowed  = "isolation-not-allowed"
	ProblemIsolationUnavailable = "isolation-unavailable"
)

// ChooseBackend picks the backend for a tenant's request that asked for
// isolation want ("" for the node's default). backends are the node's
// backends, its default first. The rules, by Capabilities and never by
// name:
//
//   - the tenant's floor is IsolationFloor: kernel, container for a
//     first-party tenant, raised by the operator's Tenant.Isolation;
//   - asking for a level below the tenant's floor is refused
//     (isolation-not-allowed, 403), as a first-party-only level is for
//     any tenant not marked first-party;
//   - otherwise the weakest backend at or above max(want, floor) serves;
//     asking for nothing gets the default backend when it meets the
//     floor;
//   - when no backend is strong enough the request is refused
//     (isolation-unavailable, 503).
func ChooseBackend(backends []Backend, t *Tenant, want Isolation) (Backend, error) {
	floor := t.IsolationFloor()
	if want != "" && !want.Valid() {
		return nil, Problem(EINVALID, ProblemUnknownIsolation, "unknown isolation %q (one of %s)", want, isolationNames())
	}
	if want != "" && !want.AtLeast(floor) {
		if want == IsolationContainer && floor == IsolationKernel {
			return nil, Problem(EFORBIDDEN, ProblemIsolationNotAllowed,
				"isolation %q runs code on the host's kernel and is for first-party tenants only; this tenant's code runs with isolation %q or stronger", want, floor)
		}
		return nil, Problem(EFORBIDDEN, ProblemIsolationNotAllowed,
			"this tenant's code runs with isolation %q or stronger (its operator's setting), not %q", floor, want)
	}
	if want == "" && len(backends) > 0 && backends[0].Capabilities().Isolation().AtLeast(floor) {
		return backends[0], nil
	}
	need := floor
	if want.AtLeast(need) {
		need = want
	}
	var best Backend
	for _, b := range backends {
		lvl := b.Capabilities().Isolation()
		if lvl.AtLeast(need) && (best == nil || best.Capabilities().Isolation().rank() > lvl.rank()) {
			best = b
		}
	}
	if best == nil {
		return nil, Problem(EUNAVAILABLE, ProblemIsolationUnavailable, "no backend on this node gives isolation %q or stronger", need)
	}
	return best, nil
}

// ParseIsolation parses a level's name ("container", "kernel", "vm");
// "gvisor" is accepted for "kernel".
func ParseIsolation(s string) (Isolation, error) {
	i := Isolation(strings.ToLower(strings.TrimSpace(s)))
	if i == "gvisor" {
		i = IsolationKernel
	}
	if !i.Valid() {
		return "", Problem(EINVALID, ProblemUnknownIsolation, "unknown isolation %q (one of %s)", s, isolationNames())
	}
	return i, nil
}

func isolationNames() string {
	names := make([]string, len(Isolations))
	for i, x := range Isolations {
		names[i] = string(x)
	}
	return strings.Join(names, ", ")
}
