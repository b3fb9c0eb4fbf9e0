package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/seal"
)

// Store is everything a store implementation offers the rest of Airlock.
type Store interface {
	airlock.Store
	airlock.SessionStore
	airlock.EgressStore
	airlock.E2BStore
	airlock.QuotaStore
	airlock.AbuseStore
	airlock.EventStore
	airlock.SessionEventGaps
	airlock.WebhookStore
	airlock.EventPruner
	airlock.KeepStore
	airlock.ExecutionCounter
	airlock.AuditStore
	airlock.BrokerGrantStore
	airlock.VolumeStore
	airlock.TenantDeleter
	airlock.SessionMetricsStore
	airlock.TemplateStore
	seal.KeyStore
	SetTenantGuard(ctx context.Context, tenantID string, p airlock.GuardPolicy) error
	// The fleet's reaper's (fleet.Store).
	MarkNodeLost(ctx context.Context, nodeID, detail string) (sessions, executions int, err error)
	LiveSessionNodes(ctx context.Context) ([]string, error)
}

// Backend is a store implementation under test.
type Backend struct {
	// New makes a new, empty database for the test (removed when it
	// ends) and returns where it is: a file path, a DSN.
	New func(t *testing.T) string
	// Open opens a store on the database at loc with the clock, closed
	// when the test ends (closing it earlier must be safe). It may be
	// called more than once for one database: two handles, as two
	// processes or two nodes would have.
	Open func(t *testing.T, loc string, now func() time.Time) Store
	// OpenNode opens a store on the database at loc as the fleet node
	// named node ("" for none), with the real clock.
	OpenNode func(t *testing.T, loc, node string) Store
	// The implementation's list limits (ListExecutions and the others).
	DefaultListLimit, MaxListLimit int
}

// fresh opens a store on a new database with a fake clock.
func (bk Backend) fresh(t *testing.T) Store {
	t.Helper()
	return bk.Open(t, bk.New(t), newClock().Now)
}

// tests are the suite, by name.
var tests = []struct {
	name string
	run  func(t *testing.T, b Backend)
}{
	{"Reopen", testReopen},
	{"ClosedStoreReturnsErrors", testClosedStoreReturnsErrors},
	{"CanceledContext", testCanceledContext},
	{"HostileText", testHostileText},
	{"Tenants", testTenants},
	{"APIKeys", testAPIKeys},
	{"KeyLifecycle", testKeyLifecycle},
	{"AdminKeys", testAdminKeys},
	{"AuditLog", testAuditLog},
	{"BrokerGrants", testBrokerGrants},
	{"Volumes", testVolumes},
	{"VolumeClaims", testVolumeClaims},
	{"VolumeSnapshots", testVolumeSnapshots},
	{"DeleteTenant", testDeleteTenant},
	{"SetTenantFirstParty", testSetTenantFirstParty},
	{"SetTenantIsolation", testSetTenantIsolation},
	{"SetTenantGuard", testSetTenantGuard},
	{"ExecutionLifecycle", testExecutionLifecycle},
	{"FinishExecutionAtomic", testFinishExecutionAtomic},
	{"TenantIsolation", testTenantIsolation},
	{"ListExecutionsPagination", testListExecutionsPagination},
	{"ListExecutionsLimit", testListExecutionsLimit},
	{"FailRunningExecutions", testFailRunningExecutions},
	{"ConcurrentWriters", testConcurrentWriters},
	{"TwoHandles", testTwoHandles},
	{"RunningExecutionsOfSessions", testRunningExecutionsOfSessions},
	{"ExecutionBackend", testExecutionBackend},
	{"ExecutionFindings", testExecutionFindings},
	{"RecordPhase", testRecordPhase},
	{"SessionLifecycleRecord", testSessionLifecycleRecord},
	{"ListSessionsPages", testListSessionsPages},
	{"SessionPausedState", testSessionPausedState},
	{"SessionBrokerScopesStored", testSessionBrokerScopesStored},
	{"IdempotencyKeys", testIdempotencyKeys},
	{"IdempotencyKeyRace", testIdempotencyKeyRace},
	{"EgressLog", testEgressLog},
	{"E2BSandboxes", testE2BSandboxes},
	{"TenantQuotas", testTenantQuotas},
	{"DailyUsage", testDailyUsage},
	{"ExecutionCounts", testExecutionCounts},
	{"AbuseEvents", testAbuseEvents},
	{"Quarantine", testQuarantine},
	{"SnapshotsAndKeys", testSnapshotsAndKeys},
	{"NodeScopedRecords", testNodeScopedRecords},
	{"EventFeed", testEventFeed},
	{"LastSessionEvents", testLastSessionEvents},
	{"WebhookQueue", testWebhookQueue},
	{"PruneEvents", testPruneEvents},
	{"SessionLifecycleStored", testSessionLifecycleStored},
	{"SessionSamples", testSessionSamples},
	{"Templates", testTemplates},
}

// Run runs the whole suite against b, each test in parallel on a
// database of its own.
func Run(t *testing.T, bk Backend) {
	if bk.New == nil || bk.Open == nil || bk.OpenNode == nil || bk.DefaultListLimit <= 0 || bk.MaxListLimit < bk.DefaultListLimit {
		t.Fatal("storetest: the Backend needs New, Open, OpenNode and its list limits")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, bk)
		})
	}
}

// clock is a fake clock that advances by step on every reading.
type clock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), step: time.Second}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	c.t = c.t.Add(c.step)
	return t
}

func mustTenant(t *testing.T, db Store, name string) *airlock.Tenant {
	t.Helper()
	tn := &airlock.Tenant{Name: name}
	if err := db.CreateTenant(context.Background(), tn); err != nil {
		t.Fatalf("CreateTenant(%q): %v", name, err)
	}
	return tn
}

func mustExecution(t *testing.T, db Store, tenantID string, adjust ...func(*airlock.Execution)) *airlock.Execution {
	t.Helper()
	e := &airlock.Execution{TenantID: tenantID, Language: airlock.Python, CodeSHA256: "abc"}
	for _, f := range adjust {
		f(e)
	}
	if err := db.CreateExecution(context.Background(), e); err != nil {
		t.Fatalf("CreateExecution: %v", err)
	}
	return e
}

// wantCode fails the test unless err has the domain error code.
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := airlock.ErrorCode(err); got != code {
		t.Errorf("%s: error code %q (%v), want %q", what, got, err, code)
	}
}
