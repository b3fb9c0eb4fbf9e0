package airlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/airlockhq/airlock"
)

// fakeBackend is a backend known only by its capabilities.
type fakeBackend struct {
	name string
	caps airlock.Capabilities
}

func (f fakeBackend) Name() string                       { return f.name }
func (f fakeBackend) Capabilities() airlock.Capabilities { return f.caps }
func (f fakeBackend) Create(context.Context, airlock.SandboxSpec) (airlock.Sandbox, error) {
	return nil, nil
}
func (f fakeBackend) Reconcile(context.Context) ([]string, error) { return nil, nil }

var (
	containerB = fakeBackend{"ns", airlock.Capabilities{}}
	kernelB    = fakeBackend{"gv", airlock.Capabilities{SeparateKernel: true}}
	vmB        = fakeBackend{"vm", airlock.Capabilities{SeparateKernel: true, HardwareIsolation: true}}
)

func TestCapabilitiesIsolation(t *testing.T) {
	for _, tt := range []struct {
		b    fakeBackend
		want airlock.Isolation
	}{{containerB, airlock.IsolationContainer}, {kernelB, airlock.IsolationKernel}, {vmB, airlock.IsolationVM}} {
		if got := tt.b.caps.Isolation(); got != tt.want {
			t.Errorf("%s: isolation %s, want %s", tt.b.name, got, tt.want)
		}
	}
}

func TestChooseBackend(t *testing.T) {
	untrusted := &airlock.Tenant{Name: "u"}
	first := &airlock.Tenant{Name: "f", FirstParty: true}
	vmFloor := &airlock.Tenant{Name: "v", Isolation: airlock.IsolationVM}
	vmFirst := &airlock.Tenant{Name: "vf", FirstParty: true, Isolation: airlock.IsolationVM}
	kernelFirst := &airlock.Tenant{Name: "kf", FirstParty: true, Isolation: airlock.IsolationKernel}
	lowered := &airlock.Tenant{Name: "l", Isolation: airlock.IsolationContainer}
	all := []airlock.Backend{kernelB, containerB, vmB} // gVisor is the node's default
	tests := []struct {
		name     string
		backends []airlock.Backend
		tenant   *airlock.Tenant
		want     airlock.Isolation
		got      string // backend name, or the problem type
	}{
		{"default for untrusted", all, untrusted, "", "gv"},
		{"default for first-party", all, first, "", "gv"},
		{"untrusted asks for container", all, untrusted, "container", airlock.ProblemIsolationNotAllowed},
		{"untrusted asks for kernel", all, untrusted, "kernel", "gv"},
		{"untrusted asks for vm", all, untrusted, "vm", "vm"},
		{"first-party asks for container", all, first, "container", "ns"},
		{"first-party asks for vm", all, first, "vm", "vm"},
		{"unknown level", all, first, "chroot", airlock.ProblemUnknownIsolation},
		{"no vm on the node", []airlock.Backend{kernelB, containerB}, untrusted, "vm", airlock.ProblemIsolationUnavailable},
		{"container default never serves untrusted", []airlock.Backend{containerB, kernelB}, untrusted, "", "gv"},
		{"container-only node refuses untrusted", []airlock.Backend{containerB}, untrusted, "", airlock.ProblemIsolationUnavailable},
		{"container-only node serves first-party", []airlock.Backend{containerB}, first, "", "ns"},
		{"weakest strong enough", []airlock.Backend{vmB, kernelB}, untrusted, "kernel", "gv"},
		{"nil tenant is untrusted", all, nil, "container", airlock.ProblemIsolationNotAllowed},
		// An operator's floor of vm: the default is the microVM, and
		// nothing weaker ever serves, first-party or not.
		{"vm floor: default is vm", all, vmFloor, "", "vm"},
		{"vm floor: asks for kernel", all, vmFloor, "kernel", airlock.ProblemIsolationNotAllowed},
		{"vm floor: asks for container", all, vmFloor, "container", airlock.ProblemIsolationNotAllowed},
		{"vm floor: asks for vm", all, vmFloor, "vm", "vm"},
		{"vm floor, first-party: asks for container", all, vmFirst, "container", airlock.ProblemIsolationNotAllowed},
		{"vm floor, first-party: default", all, vmFirst, "", "vm"},
		{"vm floor on a node without vm", []airlock.Backend{kernelB, containerB}, vmFloor, "", airlock.ProblemIsolationUnavailable},
		{"vm floor never falls back to the container default", []airlock.Backend{containerB, kernelB}, vmFloor, "", airlock.ProblemIsolationUnavailable},
		{"kernel floor, first-party: container refused", all, kernelFirst, "container", airlock.ProblemIsolationNotAllowed},
		{"kernel floor, first-party: default", []airlock.Backend{containerB, kernelB}, kernelFirst, "", "gv"},
		{"a container setting never lowers an untrusted floor", all, lowered, "container", airlock.ProblemIsolationNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := airlock.ChooseBackend(tt.backends, tt.tenant, tt.want)
			got := ""
			if err != nil {
				var e *airlock.Error
				if !asError(err, &e) {
					t.Fatalf("error is not a domain error: %v", err)
				}
				got = e.Type
			} else {
				got = b.Name()
			}
			if got != tt.got {
				t.Errorf("got %s (%v), want %s", got, err, tt.got)
			}
		})
	}
}

func asError(err error, target **airlock.Error) bool { return errors.As(err, target) }

func TestExecuteRequestIsolation(t *testing.T) {
	r := airlock.ExecuteRequest{Language: airlock.Python, Code: "1", Isolation: "sandbox"}
	if err := r.Validate(60e9); airlock.ErrorCode(err) != airlock.EINVALID {
		t.Errorf("unknown isolation: %v", err)
	}
	r.Isolation = airlock.IsolationContainer
	if err := r.Validate(60e9); err != nil {
		t.Errorf("container isolation: %v", err)
	}
}

func TestIsolationFloor(t *testing.T) {
	for _, tt := range []struct {
		tenant *airlock.Tenant
		want   airlock.Isolation
	}{
		{nil, airlock.IsolationKernel},
		{&airlock.Tenant{}, airlock.IsolationKernel},
		{&airlock.Tenant{FirstParty: true}, airlock.IsolationContainer},
		{&airlock.Tenant{Isolation: airlock.IsolationContainer}, airlock.IsolationKernel},
		{&airlock.Tenant{FirstParty: true, Isolation: airlock.IsolationContainer}, airlock.IsolationContainer},
		{&airlock.Tenant{FirstParty: true, Isolation: airlock.IsolationKernel}, airlock.IsolationKernel},
		{&airlock.Tenant{Isolation: airlock.IsolationVM}, airlock.IsolationVM},
		{&airlock.Tenant{FirstParty: true, Isolation: airlock.IsolationVM}, airlock.IsolationVM},
		{&airlock.Tenant{Isolation: "bogus"}, airlock.IsolationKernel},
	} {
		if got := tt.tenant.IsolationFloor(); got != tt.want {
			t.Errorf("%+v: floor %s, want %s", tt.tenant, got, tt.want)
		}
	}
}

func TestParseIsolation(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want airlock.Isolation
	}{
		{"vm", airlock.IsolationVM}, {" VM ", airlock.IsolationVM}, {"kernel", airlock.IsolationKernel},
		{"gvisor", airlock.IsolationKernel}, {"container", airlock.IsolationContainer},
		{"", ""}, {"microvm", ""}, {"vm\x00", ""},
	} {
		got, err := airlock.ParseIsolation(tt.in)
		if got != tt.want || (err == nil) != (tt.want != "") {
			t.Errorf("ParseIsolation(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
		if err != nil && airlock.ErrorCode(err) != airlock.EINVALID {
			t.Errorf("ParseIsolation(%q): error %v is not EINVALID", tt.in, err)
		}
	}
}
