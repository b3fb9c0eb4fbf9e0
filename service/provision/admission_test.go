package provision_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/quota"
)

// fakeBackend is a backend that is never asked for a sandbox: admission
// and the choice of backend need only its name and capabilities.
type fakeBackend struct {
	name string
	caps airlock.Capabilities
}

func (f fakeBackend) Name() string                       { return f.name }
func (f fakeBackend) Capabilities() airlock.Capabilities { return f.caps }
func (f fakeBackend) Create(context.Context, airlock.SandboxSpec) (airlock.Sandbox, error) {
	return nil, errors.New("fake backend")
}
func (f fakeBackend) Reconcile(context.Context) ([]string, error) { return nil, nil }

var _ airlock.Backend = fakeBackend{}

func newProvisioner(t *testing.T, a provision.Admission) *provision.Provisioner {
	t.Helper()
	p, err := provision.New(provision.Config{
		Backends:  []airlock.Backend{fakeBackend{name: "kernel", caps: airlock.Capabilities{SeparateKernel: true}}},
		Admission: a,
		Pool:      provision.PoolConfig{Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// wantProblem checks err is a domain problem of the code and type, with a
// Retry-After when retry is set.
func wantProblem(t *testing.T, what string, err error, code, typ string, retry bool) {
	t.Helper()
	var ae *airlock.Error
	if !errors.As(err, &ae) || ae.Code != code || ae.Type != typ {
		t.Fatalf("%s: got %v, want %s %s", what, err, code, typ)
	}
	if retry != (airlock.RetryAfterOf(err) > 0) {
		t.Errorf("%s: Retry-After %v", what, airlock.RetryAfterOf(err))
	}
}

// One tenant holds at most its share of the one-shot slots: past it its
// runs wait, and past its share of the queue it gets a 429 at once; the
// others still run; a full node makes a request wait for a slot, then
// answer 503.
func TestOneShotAdmission(t *testing.T) {
	p := newProvisioner(t, provision.Admission{OneShot: 4, OneShotTenantShare: 0.5, MaxQueue: 4, QueueTimeout: 100 * time.Millisecond})
	ctx := context.Background()
	a, b, c := &airlock.Tenant{ID: "a"}, &airlock.Tenant{ID: "b"}, &airlock.Tenant{ID: "c"}
	claim := func(tn *airlock.Tenant) (*provision.Ticket, error) {
		return p.Admit(ctx, provision.Claim{Kind: provision.OneShot, Tenant: tn})
	}
	var held []*provision.Ticket
	for _, tn := range []*airlock.Tenant{a, a, b} {
		tk, err := claim(tn)
		if err != nil {
			t.Fatalf("tenant %s: %v", tn.ID, err)
		}
		held = append(held, tk)
	}
	// a holds its share (2 of 4) while a slot is free: its third run
	// waits for one of its own, and gets a 429 when that takes too long.
	start := time.Now()
	_, err := claim(a)
	wantProblem(t, "a third run of a", err, airlock.ERATELIMITED, provision.ProblemTenantBusy, true)
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("the third run of a gave up after %v, before the queue timeout", took)
	}
	// While a's runs wait, past its share of the queue (2 of 4) the
	// answer is a 429 at once.
	waiting := make(chan error, 2)
	for range 2 {
		go func() {
			tk, err := p.Admit(ctx, provision.Claim{Kind: provision.OneShot, Tenant: a})
			if err == nil {
				tk.Cancel()
			}
			waiting <- err
		}()
	}
	testreq.Eventually(t, 5*time.Second, "two runs of a to wait", func() bool { return p.Usage("a").OneShot == 4 })
	start = time.Now()
	_, err = claim(a)
	wantProblem(t, "a run of a past its share of the queue", err, airlock.ERATELIMITED, provision.ProblemTenantBusy, true)
	if took := time.Since(start); took > 50*time.Millisecond {
		t.Errorf("the refusal took %v: it must not wait", took)
	}
	for range 2 {
		<-waiting
	}
	// b still runs; then the node is full and c waits for a slot, then
	// gets a 503.
	tk, err := claim(b)
	if err != nil {
		t.Fatal(err)
	}
	held = append(held, tk)
	start = time.Now()
	_, err = claim(c)
	wantProblem(t, "a run of c on a full node", err, airlock.EUNAVAILABLE, provision.ProblemNodeBusy, true)
	if time.Since(start) < 100*time.Millisecond {
		t.Errorf("a full node answered after %v, before the queue timeout", time.Since(start))
	}
	// A freed slot goes to the next who waits.
	got := make(chan error, 1)
	go func() {
		tk, err := p.Admit(ctx, provision.Claim{Kind: provision.OneShot, Tenant: c})
		if err == nil {
			tk.Cancel()
		}
		got <- err
	}()
	held[0].Cancel()
	held[0].Cancel() // twice is harmless
	if err := <-got; err != nil {
		t.Errorf("after a slot was freed: %v", err)
	}
	for _, tk := range held[1:] {
		tk.Cancel()
	}
	if got := p.Usage("a"); got.OneShot != 0 {
		t.Errorf("usage of a after all ended: %+v", got)
	}
	p.StopAdmitting()
	_, err = claim(a)
	wantProblem(t, "after StopAdmitting", err, airlock.EUNAVAILABLE, provision.ProblemShuttingDown, true)
}

func TestSessionAdmission(t *testing.T) {
	p := newProvisioner(t, provision.Admission{Sessions: 4, SessionsPerTenant: 2})
	ctx := context.Background()
	claim := func(id string) (*provision.Ticket, error) {
		return p.Admit(ctx, provision.Claim{Kind: provision.Session, Tenant: &airlock.Tenant{ID: id}})
	}
	for _, id := range []string{"a", "a", "b"} {
		if _, err := claim(id); err != nil {
			t.Fatal(err)
		}
	}
	_, err := claim("a")
	wantProblem(t, "a third session of a", err, airlock.ERATELIMITED, provision.ProblemSessionQuota, true)
	if _, err := claim("c"); err != nil {
		t.Fatal(err)
	}
	_, err = claim("d")
	wantProblem(t, "a session on a full node", err, airlock.EUNAVAILABLE, provision.ProblemNodeBusy, true)
}

// Every claim, one-shot or session, gets its backend from the tenant's
// floor: an untrusted tenant never reaches the container level.
func TestClaimIsolationAndNetwork(t *testing.T) {
	p := newProvisioner(t, provision.Admission{})
	ctx := context.Background()
	untrusted, first := &airlock.Tenant{ID: "u"}, &airlock.Tenant{ID: "f", FirstParty: true}
	for _, kind := range []provision.Kind{provision.OneShot, provision.Session} {
		_, err := p.Admit(ctx, provision.Claim{Kind: kind, Tenant: untrusted, Isolation: airlock.IsolationContainer})
		wantProblem(t, kind.String()+": untrusted asks for container", err, airlock.EFORBIDDEN, airlock.ProblemIsolationNotAllowed, false)
		_, err = p.Admit(ctx, provision.Claim{Kind: kind, Tenant: first, Isolation: airlock.IsolationVM})
		wantProblem(t, kind.String()+": vm on a node without one", err, airlock.EUNAVAILABLE, airlock.ProblemIsolationUnavailable, false)
		tk, err := p.Admit(ctx, provision.Claim{Kind: kind, Tenant: first, Isolation: airlock.IsolationContainer})
		if err != nil || tk.Backend().Name() != "kernel" {
			t.Fatalf("%s: first-party asks for container on a node with only a kernel backend: %v", kind, err)
		}
		tk.Cancel()
		_, err = p.Admit(ctx, provision.Claim{Kind: kind, Tenant: untrusted, Network: true})
		wantProblem(t, kind.String()+": a network without egress", err, airlock.EFORBIDDEN, "network-unavailable", false)
	}
	if u := p.Usage("u"); u != (provision.Usage{}) {
		t.Errorf("refused claims left usage %+v", u)
	}
}

// A tenant whose operator set its floor to vm gets the microVM backend
// whatever it asks for, one-shot or session, and is refused anything
// weaker; the lease's accelerator is the backend's.
func TestClaimVMFloor(t *testing.T) {
	vm := fakeBackend{name: "microvm", caps: airlock.Capabilities{SeparateKernel: true, HardwareIsolation: true, Accelerator: "tcg"}}
	p, err := provision.New(provision.Config{
		Backends: []airlock.Backend{
			fakeBackend{name: "kernel", caps: airlock.Capabilities{SeparateKernel: true}},
			fakeBackend{name: "container"}, vm,
		},
		Pool: provision.PoolConfig{Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tn := range []*airlock.Tenant{
		{ID: "v", Isolation: airlock.IsolationVM},
		{ID: "vf", FirstParty: true, Isolation: airlock.IsolationVM},
	} {
		for _, kind := range []provision.Kind{provision.OneShot, provision.Session} {
			for _, want := range []airlock.Isolation{"", airlock.IsolationVM} {
				tk, err := p.Admit(ctx, provision.Claim{Kind: kind, Tenant: tn, Isolation: want})
				if err != nil || tk.Backend().Name() != "microvm" {
					t.Fatalf("%s %s asks for %q: %v, want the microvm backend", tn.ID, kind, want, err)
				}
				tk.Cancel()
			}
			for _, want := range []airlock.Isolation{airlock.IsolationKernel, airlock.IsolationContainer} {
				_, err := p.Admit(ctx, provision.Claim{Kind: kind, Tenant: tn, Isolation: want})
				wantProblem(t, tn.ID+" "+kind.String()+" asks for "+string(want), err, airlock.EFORBIDDEN, airlock.ProblemIsolationNotAllowed, false)
			}
		}
		if u := p.Usage(tn.ID); u != (provision.Usage{}) {
			t.Errorf("%s: claims left usage %+v", tn.ID, u)
		}
	}
}

// BenchmarkAdmit is the cost of choosing the backend and taking and
// giving back a one-shot slot.
func BenchmarkAdmit(b *testing.B) {
	p, err := provision.New(provision.Config{
		Backends: []airlock.Backend{fakeBackend{name: "kernel", caps: airlock.Capabilities{SeparateKernel: true}}},
		Pool:     provision.PoolConfig{Disabled: true},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	tn := &airlock.Tenant{ID: "t"}
	for b.Loop() {
		tk, err := p.Admit(ctx, provision.Claim{Kind: provision.OneShot, Tenant: tn})
		if err != nil {
			b.Fatal(err)
		}
		tk.Cancel()
	}
}

// A claim past a quota takes nothing of the node, and one the node
// refuses gives its quota share back.
func TestQuotaAdmission(t *testing.T) {
	ledger, err := quota.New(quota.Config{Defaults: quota.Limits{quota.Runs: 2, quota.Memory: 1 << 30, quota.Sessions: 1}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := provision.New(provision.Config{
		Backends:  []airlock.Backend{fakeBackend{name: "kernel", caps: airlock.Capabilities{SeparateKernel: true}}},
		Admission: provision.Admission{OneShot: 1, MaxQueue: 1, QueueTimeout: time.Minute, Sessions: 1},
		Quotas:    ledger,
		Pool:      provision.PoolConfig{Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, b := &airlock.Tenant{ID: "a"}, &airlock.Tenant{ID: "b"}
	small := airlock.Limits{CPUs: 1, MemoryBytes: 256 << 20}
	used := func(tenant string, k quota.Key) int64 {
		for _, q := range ledger.UsageOf(tenant).Quotas {
			if q.Quota == string(k) {
				return q.Used
			}
		}
		return -1
	}
	_, err = p.Admit(ctx, provision.Claim{Kind: provision.OneShot, Tenant: a, Limits: airlock.Limits{MemoryBytes: 2 << 30}})
	wantProblem(t, "2 GiB", err, airlock.ERATELIMITED, quota.Memory.Problem(), true)
	if u := p.Usage("a"); u != (provision.Usage{}) || used("a", quota.Memory) != 0 || used("a", quota.Runs) != 0 {
		t.Errorf("a refused claim holds %+v, memory %d", u, used("a", quota.Memory))
	}
	// The node's one session is b's; a's session claim passes its quota
	// but not the node, and gives its quota share back.
	sb, err := p.Admit(ctx, provision.Claim{Kind: provision.Session, Tenant: b, Limits: small})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Admit(ctx, provision.Claim{Kind: provision.Session, Tenant: a, Limits: small})
	wantProblem(t, "a session on a full node", err, airlock.EUNAVAILABLE, provision.ProblemNodeBusy, true)
	if n := used("a", quota.Sessions); n != 0 {
		t.Errorf("a session the node refused holds %d of the quota", n)
	}
	sb.Cancel()
	if n := used("b", quota.Memory); n != 0 {
		t.Errorf("a cancelled ticket holds %d bytes", n)
	}
	// Runs: two of a's at once (one holds the node's slot, one waits);
	// the third is refused by the quota at once, not queued.
	t1, err := p.Admit(ctx, provision.Claim{Kind: provision.OneShot, Tenant: a, Limits: small})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() {
		tk, err := p.Admit(ctx, provision.Claim{Kind: provision.OneShot, Tenant: a, Limits: small})
		if err == nil {
			tk.Cancel()
		}
		waiting <- err
	}()
	testreq.Eventually(t, 10*time.Second, "the second run waits", func() bool { return p.Usage("a").OneShot == 2 })
	_, err = p.Admit(ctx, provision.Claim{Kind: provision.OneShot, Tenant: a, Limits: small})
	wantProblem(t, "a third run", err, airlock.ERATELIMITED, quota.Runs.Problem(), true)
	if quota.RefusalOf(err) != quota.Runs {
		t.Errorf("the refusal names %q", quota.RefusalOf(err))
	}
	t1.Cancel()
	if err := <-waiting; err != nil {
		t.Fatal(err)
	}
	if n := used("a", quota.Runs); n != 0 {
		t.Errorf("runs held after all ended: %d", n)
	}
}
