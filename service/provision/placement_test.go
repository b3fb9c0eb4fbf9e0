package provision_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/teststack"
)

// The provisioner places each execution by its tenant's isolation floor and
// the level it asks for, read from the backends' Capabilities: an
// untrusted tenant never reaches the namespaces backend, a first-party
// one does when it asks, and the record says which backend ran the code.
func TestIsolationPolicy(t *testing.T) {
	gv := testenv.GVisor(t)
	ns := testenv.Namespaces(t)
	st := teststack.New(t, teststack.Options{Backend: gv, Extra: []airlock.Backend{ns}, NoServer: true})
	m, store := st.Manager, st.Store
	ctx := context.Background()
	untrusted := &airlock.Tenant{Name: "untrusted"}
	first := &airlock.Tenant{Name: "first", FirstParty: true}
	for _, tn := range []*airlock.Tenant{untrusted, first} {
		if err := store.CreateTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	code := airlock.ExecuteRequest{Language: airlock.Bash, Code: "cat /proc/version >/dev/null; echo hi", TimeoutSec: 20}
	tests := []struct {
		name    string
		tenant  *airlock.Tenant
		iso     airlock.Isolation
		backend string // or the problem type
	}{
		{"untrusted, default", untrusted, "", "gvisor"},
		{"untrusted asks for container", untrusted, airlock.IsolationContainer, airlock.ProblemIsolationNotAllowed},
		{"untrusted asks for kernel", untrusted, airlock.IsolationKernel, "gvisor"},
		{"untrusted asks for vm", untrusted, airlock.IsolationVM, airlock.ProblemIsolationUnavailable},
		{"first-party, default", first, "", "gvisor"},
		{"first-party asks for container", first, airlock.IsolationContainer, "namespaces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := code
			req.Isolation = tt.iso
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			e, err := m.Execute(ctx, tt.tenant, "test", req)
			if err != nil {
				var ae *airlock.Error
				if !errors.As(err, &ae) || ae.Type != tt.backend {
					t.Fatalf("error %v, want %s", err, tt.backend)
				}
				return
			}
			if e.Backend != tt.backend || e.ExitCode != 0 || e.Stdout != "hi\n" {
				t.Fatalf("ran on %q: exit %d %q %q; want %s", e.Backend, e.ExitCode, e.Stdout, e.Stderr, tt.backend)
			}
			got, err := store.Execution(ctx, tt.tenant.ID, e.ID)
			if err != nil || got.Backend != tt.backend {
				t.Errorf("recorded backend %q (%v), want %s", got.Backend, err, tt.backend)
			}
		})
	}
	// A refused request records nothing.
	page, err := store.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: untrusted.ID, Limit: 100})
	if err != nil || len(page) != 2 {
		t.Errorf("the untrusted tenant has %d executions (%v), want the 2 that ran", len(page), err)
	}
}
