package egress_test

import (
	"errors"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/airlockhq/airlock/internal/testnet"
	"github.com/airlockhq/airlock/service/egress"
)

func newResolver(inet *testnet.Internet) (*egress.Resolver, error) {
	return egress.NewResolver([]string{inet.Upstream()}, 0)
}

// hostMetadataCounter counts (and drops) every packet to 169.254.169.254
// on the host's own hooks (prerouting, forward, output) while the test
// runs, and returns a reader of the count.
func hostMetadataCounter(t *testing.T) func() uint64 {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "t" + testID()})
	c.AddObj(&nftables.CounterObj{Table: tbl, Name: "metadata"})
	for _, h := range []*nftables.ChainHook{nftables.ChainHookPrerouting, nftables.ChainHookForward, nftables.ChainHookOutput} {
		ch := c.AddChain(&nftables.Chain{Name: "h" + testID(), Table: tbl, Type: nftables.ChainTypeFilter, Hooknum: h, Priority: nftables.ChainPriorityRaw})
		c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{169, 254, 169, 254}},
			&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: "metadata"},
			&expr.Verdict{Kind: expr.VerdictDrop},
		}})
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.DelTable(tbl)
		if err := c.Flush(); err != nil {
			t.Errorf("remove the host counter: %v", err)
		}
	})
	return func() uint64 {
		objs, err := c.GetObjects(tbl)
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, o := range objs {
			if co, ok := o.(*nftables.CounterObj); ok {
				n += co.Packets
			}
		}
		return n
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
