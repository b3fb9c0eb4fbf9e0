package airlock_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// Every pair of states against the state machine: exactly the moves of
// the lifecycle are allowed; every other is refused with an error that
// wraps ErrIllegalTransition and carries code conflict.
func TestSessionTransitions(t *testing.T) {
	const (
		c  = airlock.SessionCreating
		r  = airlock.SessionReady
		b  = airlock.SessionBusy
		dg = airlock.SessionDestroying
		dd = airlock.SessionDestroyed
		f  = airlock.SessionFailed
		p  = airlock.SessionPaused
		l  = airlock.SessionLost
	)
	allowed := map[[2]airlock.SessionState]bool{
		{c, r}: true, {c, dg}: true, {c, f}: true,
		{r, b}: true, {r, dg}: true, {r, f}: true, {r, p}: true,
		{p, r}: true, {p, dg}: true, {p, f}: true,
		{b, r}: true, {b, dg}: true, {b, f}: true,
		{dg, dd}: true, {dg, f}: true, {dg, l}: true,
	}
	for _, from := range airlock.SessionStates {
		for _, to := range airlock.SessionStates {
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				err := from.Transition(to)
				if allowed[[2]airlock.SessionState{from, to}] {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					return
				}
				if err == nil {
					t.Fatal("allowed")
				}
				if !errors.Is(err, airlock.ErrIllegalTransition) || airlock.ErrorCode(err) != airlock.ECONFLICT ||
					!strings.Contains(err.Error(), string(from)+" to "+string(to)) {
					t.Fatalf("error %v", err)
				}
			})
		}
	}
	for _, s := range airlock.SessionStates {
		if s.Final() == s.Live() && s != dg && s != p {
			t.Errorf("%s: final %v, live %v", s, s.Final(), s.Live())
		}
		if s.Final() && len(allowedFrom(allowed, s)) != 0 {
			t.Errorf("final state %s has moves", s)
		}
	}
	if airlock.SessionState("sleeping").Valid() || airlock.SessionState("sleeping").Transition(r) == nil {
		t.Error("an unknown state is valid")
	}
}

func allowedFrom(allowed map[[2]airlock.SessionState]bool, s airlock.SessionState) []airlock.SessionState {
	var out []airlock.SessionState
	for k := range allowed {
		if k[0] == s {
			out = append(out, k[1])
		}
	}
	return out
}

func TestCreateSessionRequestValidate(t *testing.T) {
	tenant := &airlock.Tenant{ID: "01T", Name: "acme"}
	tests := []struct {
		name string
		req  airlock.CreateSessionRequest
		typ  string
	}{
		{"empty", airlock.CreateSessionRequest{}, ""},
		{"reference shape, no network", airlock.CreateSessionRequest{Tenant: "acme", Image: "python-ds", Size: "small", TimeoutS: 600, Network: &airlock.NetworkPolicy{Mode: "none"}, BrokerScopes: []string{}}, ""},
		{"tenant by ID", airlock.CreateSessionRequest{Tenant: "01T"}, ""},
		{"other tenant", airlock.CreateSessionRequest{Tenant: "other"}, "tenant-mismatch"},
		{"size", airlock.CreateSessionRequest{Size: "xl"}, "unknown-size"},
		{"timeout", airlock.CreateSessionRequest{TimeoutS: -5}, "timeout-out-of-range"},
		{"idle timeout", airlock.CreateSessionRequest{IdleTimeoutS: -5}, "timeout-out-of-range"},
		{"allow list", airlock.CreateSessionRequest{Network: &airlock.NetworkPolicy{Mode: "allow_list", Allow: []string{"pypi.org:443", "*.corp.test", "api.test"}}}, ""},
		{"empty allow list", airlock.CreateSessionRequest{Network: &airlock.NetworkPolicy{Mode: "allow_list"}}, ""},
		{"address in the list", airlock.CreateSessionRequest{Network: &airlock.NetworkPolicy{Mode: "allow_list", Allow: []string{"10.0.0.1:443"}}}, "invalid-allow-list"},
		{"none with a list", airlock.CreateSessionRequest{Network: &airlock.NetworkPolicy{Mode: "none", Allow: []string{"x:1"}}}, "invalid-network"},
		{"unknown mode", airlock.CreateSessionRequest{Network: &airlock.NetworkPolicy{Mode: "open"}}, "invalid-network"},
		{"no mode", airlock.CreateSessionRequest{Network: &airlock.NetworkPolicy{}}, "invalid-network"},
		{"broker", airlock.CreateSessionRequest{BrokerScopes: []string{"tickets.read"}}, ""},
		{"bad broker scope", airlock.CreateSessionRequest{BrokerScopes: []string{"tickets read"}}, "invalid-broker-scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate(tenant)
			var e *airlock.Error
			switch {
			case tt.typ == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.typ != "" && (!errors.As(err, &e) || e.Type != tt.typ):
				t.Fatalf("got %v, want %s", err, tt.typ)
			}
		})
	}
}

func TestSessionExecRequestValidate(t *testing.T) {
	tests := []struct {
		name string
		req  airlock.SessionExecRequest
		typ  string
	}{
		{"cmd", airlock.SessionExecRequest{Cmd: []string{"ls", "-l"}}, ""},
		{"shell", airlock.SessionExecRequest{Shell: "ls | wc -l", Env: map[string]string{"A_1": "x"}, Cwd: "sub", Stdin: "in", TimeoutSec: 60}, ""},
		{"nothing", airlock.SessionExecRequest{}, "missing-command"},
		{"both", airlock.SessionExecRequest{Cmd: []string{"ls"}, Shell: "ls"}, "invalid-command"},
		{"empty program", airlock.SessionExecRequest{Cmd: []string{""}}, "invalid-command"},
		{"NUL", airlock.SessionExecRequest{Cmd: []string{"a\x00b"}}, "invalid-command"},
		{"env name", airlock.SessionExecRequest{Shell: "x", Env: map[string]string{"1A": "x"}}, "invalid-env"},
		{"env =", airlock.SessionExecRequest{Shell: "x", Env: map[string]string{"A=B": "x"}}, "invalid-env"},
		{"too large", airlock.SessionExecRequest{Shell: strings.Repeat("x", 300<<10)}, "command-too-large"},
		{"stdin", airlock.SessionExecRequest{Shell: "x", Stdin: strings.Repeat("x", airlock.MaxStdinBytes+1)}, "stdin-too-large"},
		{"timeout", airlock.SessionExecRequest{Shell: "x", TimeoutSec: 3601}, "timeout-out-of-range"},
		{"negative timeout", airlock.SessionExecRequest{Shell: "x", TimeoutSec: -1}, "timeout-out-of-range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate(time.Hour)
			var e *airlock.Error
			switch {
			case tt.typ == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.typ != "" && (!errors.As(err, &e) || e.Type != tt.typ):
				t.Fatalf("got %v, want %s", err, tt.typ)
			}
		})
	}
	for _, k := range []string{"", "a b", "é", strings.Repeat("k", 256)} {
		if airlock.ValidIdempotencyKey(k) {
			t.Errorf("idempotency key %q accepted", k)
		}
	}
	if !airlock.ValidIdempotencyKey("run-7f3a:step-12") {
		t.Error("the reference idempotency key is refused")
	}
}
