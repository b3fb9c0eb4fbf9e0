package dockerfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/airlockhq/airlock"
)

// The network of RUN steps: a build that asks for one (Request.Network)
// runs each RUN in a network namespace of its own that the node's egress
// makes for the step (as for a session with an allow list) and removes
// when the step ends. The proxy admits only the names of the build's
// allow list, never what the operator's egress rules forbid (private,
// loopback and metadata ranges among them), and counts the bytes against
// the tenant's egress budget; every connection is in the egress log
// under the request's execution ID. A build without one has no network.

// ErrNoEgress is the error of a build that asks for a network on a
// builder without an egress service.
var ErrNoEgress = errors.New("this node has no egress proxy, so RUN steps here have no network")

// networkOf checks a build's network request and returns its allow list
// normalised and sorted (the part of a RUN step's cache key); nil for a
// build without a network.
func (b *Builder) networkOf(n *airlock.NetworkRequest) ([]string, error) {
	if n == nil {
		return nil, nil
	}
	if b.cfg.Egress == nil {
		return nil, ErrNoEgress
	}
	if n.Policy.Mode != airlock.NetworkAllowList || len(n.Policy.Allow) == 0 {
		return nil, errors.New("a build's network needs an allow list")
	}
	rules, err := airlock.ParseAllowList(n.Policy.Allow)
	if err != nil {
		return nil, err
	}
	allow := make([]string, 0, len(rules))
	for _, r := range rules {
		allow = append(allow, r.String())
	}
	slices.Sort(allow)
	return slices.Compact(allow), nil
}

// run runs one RUN step, in a network made for it when the build has
// one; the network is removed once the step's sandbox is gone.
func (b *Builder) run(ctx context.Context, step airlock.BuildStep, network *airlock.NetworkRequest, log io.Writer) (int, error) {
	if network == nil {
		return b.cfg.Runner.RunBuildStep(ctx, step)
	}
	att, err := b.cfg.Egress.Attach(ctx, *network)
	if err != nil {
		return -1, fmt.Errorf("the step's network could not be made: %w", err)
	}
	defer func() {
		if err := att.Close(context.WithoutCancel(ctx)); err != nil {
			b.cfg.Logger.Warn("remove a build step's network", "step", step.ID, "err", err)
		}
	}()
	fmt.Fprintf(log, "network: through the egress proxy, allowed: %s\n", strings.Join(network.Policy.Allow, ", "))
	step.Network = att.Sandbox()
	return b.cfg.Runner.RunBuildStep(ctx, step)
}
