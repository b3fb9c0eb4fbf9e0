package egress_test

import (
	"context"
	"testing"
	"time"

	"github.com/airlockhq/airlock/service/egress"
)

// Close right after Start must end the resolvers even when they have not
// activated yet (a DNS server's Shutdown fails before it has started, and
// the server then served on forever and Close waited for it).
func TestCloseRightAfterStart(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	cfg := f.cfg
	for i := 0; i < 20; i++ {
		cfg.Prefix = f.cfg.Prefix[:1] + "c" + f.cfg.Prefix[2:]
		svc, err := egress.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		svc.Start()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		done := make(chan error, 1)
		go func() { done <- svc.Close(ctx) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("close %d: %v", i, err)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("close %d: still waiting after 15 s", i)
		}
		cancel()
	}
}
