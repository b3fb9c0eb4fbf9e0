package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
)

// readyProbeTimeout bounds each dependency's check of /readyz, so a
// store or an etcd that does not answer makes the node not ready at
// once instead of hanging the probe.
const readyProbeTimeout = 2 * time.Second

// readyChecks are the dependencies /readyz checks, each for real: the
// store answers a query, runsc is installed, the default images are
// built, the blob store answers, and (in a fleet) an etcd member
// reports its status. The reasons shown are short and fixed; the
// errors behind them are logged by the API.
func (n *Node) readyChecks() []rest.ReadyCheck {
	checks := []rest.ReadyCheck{
		{Name: "store", Check: n.checkStore},
		{Name: "runsc", Check: checkRunsc},
		{Name: "images", Check: n.checkImages},
		{Name: "blobs", Check: n.checkBlobs},
	}
	if n.etcd != nil {
		checks = append(checks, rest.ReadyCheck{Name: "etcd", Check: n.checkEtcd})
	}
	checks = append(checks, rest.ReadyCheck{Name: "pool", Check: n.checkPool, Warm: true})
	return checks
}

// unready is a failed check: reason is what /readyz shows, err what the
// log says.
func unready(reason string, err error) error {
	e := airlock.Errorf(airlock.EUNAVAILABLE, "%s", reason)
	if err == nil {
		return e
	}
	return errors.Join(e, err)
}

func (n *Node) checkStore(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyProbeTimeout)
	defer cancel()
	if _, err := n.Store.CountTenants(ctx); err != nil {
		if ctx.Err() != nil {
			return unready("no answer within "+readyProbeTimeout.String(), err)
		}
		return unready("unreachable", err)
	}
	return nil
}

func checkRunsc(context.Context) error {
	if _, err := execLookPath("runsc"); err != nil {
		return unready("runsc is not installed", err)
	}
	return nil
}

func (n *Node) checkImages(ctx context.Context) error {
	for _, name := range []string{"base", "python-ds"} {
		if _, err := n.Images.Resolve(ctx, name); errors.Is(err, airlock.ErrImageBuilding) {
			return unready("image "+name+" is being built (see airlockd's log)", err)
		} else if err != nil {
			return unready("image "+name+" is not built", err)
		}
	}
	return nil
}

// checkBlobs reads an object that is never written: "not found" is the
// answer of a blob store that works.
func (n *Node) checkBlobs(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyProbeTimeout)
	defer cancel()
	r, _, err := n.Blobs.Open(ctx, "readyz/probe")
	if err == nil {
		r.Close()
		return nil
	}
	if airlock.ErrorCode(err) == airlock.ENOTFOUND || errors.Is(err, airlock.ErrNotFound) {
		return nil
	}
	if ctx.Err() != nil {
		return unready("no answer within "+readyProbeTimeout.String(), err)
	}
	return unready("unreachable", err)
}

// checkEtcd asks the members for their status until one answers.
func (n *Node) checkEtcd(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyProbeTimeout)
	defer cancel()
	var errs []error
	for _, ep := range n.etcd.Endpoints() {
		if _, err := n.etcd.Status(ctx, ep); err != nil {
			errs = append(errs, err)
			continue
		}
		return nil
	}
	return unready("no member answers", errors.Join(errs...))
}

// checkPool is the warm level (GET /readyz?warm=true): every image and
// language readied at start (--warm, --warm-sessions) has had its first
// pool member, or provision.WarmUpLimit has passed since the start.
func (n *Node) checkPool(context.Context) error {
	if ok, warm, keys := n.Provisioner.Warmed(); !ok {
		return unready(fmt.Sprintf("warming: %d of %d ready", warm, keys), nil)
	}
	return nil
}
