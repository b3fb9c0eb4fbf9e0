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
