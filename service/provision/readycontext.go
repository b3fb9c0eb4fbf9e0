package provision

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
)

// readyContext is a lease's claim on the code context its sandbox was
// readied with (Recipe.Context): taken at most once.
type readyContext struct {
	mu    sync.Mutex
	taken bool
}

// reseedPython renews, in a Python context restored from a snapshot,
// what clones of that snapshot would otherwise share: the state of
// random (and numpy's, and OpenSSL's when loaded) and tempfile's name
// sequence, as the warm one-shot runtime does before its program
// (agent/runners/python_warm.py). os.urandom, uuid.uuid4 and secrets
// read the sandbox kernel's entropy, which a restore does not replay.
// It leaves no name behind in the context's namespace.
const reseedPython = `def _airlock_reseed():
    import os, sys
    r = sys.modules.get("random")
    if r is not None:
        r.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()
    if "_ssl" in sys.modules:
        import ssl
        ssl.RAND_add(os.urandom(64), 64.0)
    t = sys.modules.get("tempfile")
    if t is not None:
        t._name_sequence = None
_airlock_reseed()
del _airlock_reseed
`

// contextImports is a cell that imports modules, each only if it can be
// (a missing module only costs speed), and leaves no name behind.
func contextImports(modules []string) string {
	var b strings.Builder
	b.WriteString("def _airlock_preload():\n    import importlib\n")
	for _, m := range modules {
		fmt.Fprintf(&b, "    try:\n        importlib.import_module(%q)\n    except Exception:\n        pass\n", m)
	}
	b.WriteString("_airlock_preload()\ndel _airlock_preload\n")
	return b.String()
}

// reseedTimeoutMS bounds the reseed cell (and the preload one).
const reseedTimeoutMS = 10_000

// TakeReadyContext hands the caller the idle code context of language
// that the leased sandbox was readied with (a session's first context of
// that language), reseeded so that no two sandboxes restored from one
// snapshot share its random state. It returns "" and no error when there
// is none to take: the sandbox was booted for this lease, was taken
// already, or the context is no longer idle; known reports the IDs the
// caller has already (its own contexts are never taken). A context whose
// reseed fails is closed and "" returned: the caller starts a fresh one.
//
// A pool member's context was reseeded when the member was readied
// (Provisioner.ready: right after its restore, off any request's path),
// so taking it costs one round trip; a sandbox restored for this very
// request is reseeded now.
func (l *Lease) TakeReadyContext(ctx context.Context, language string, known func(id string) bool) (string, error) {
	if language != protocol.ContextPython || (l.source != airlock.StartPool && l.source != airlock.StartRestore) {
		return "", nil
	}
	l.ready.mu.Lock()
	defer l.ready.mu.Unlock()
	if l.ready.taken {
		return "", nil
	}
	l.ready.taken = true
	var id string
	var err error
	if l.source == airlock.StartPool {
		id, err = idleContext(ctx, l.sb, language, known)
	} else {
		id, err = l.p.reseedContext(ctx, l.sb, language, known)
	}
	if id != "" {
		l.p.metrics.readyContexts.Inc()
	}
	return id, err
}

// idleContext is the ID of an idle context of language in sb that known
// does not report, or "".
func idleContext(ctx context.Context, sb airlock.Sandbox, language string, known func(id string) bool) (string, error) {
	list, err := sb.Agent().ListContexts(ctx)
	if err != nil {
		return "", err
	}
	for _, c := range list {
		if c.Language == language && c.State == protocol.ContextIdle && !known(c.ID) {
			return c.ID, nil
		}
	}
	return "", nil
}

// reseedContext reseeds the idle context of language in sb that known
// does not report (reseedPython) and returns its ID; "" when there is
// none, or when its reseed failed (it is closed then: a fresh one is
// started when one is asked for). An error says the agent could not be
// asked.
func (p *Provisioner) reseedContext(ctx context.Context, sb airlock.Sandbox, language string, known func(id string) bool) (string, error) {
	id, err := idleContext(ctx, sb, language, known)
	if err != nil || id == "" {
		return "", err
	}
	a := sb.Agent()
	res, err := a.RunCell(ctx, id, reseedPython, reseedTimeoutMS, io.Discard, io.Discard)
	if err == nil && (res.Error != nil || res.Died || res.TimedOut) {
		err = fmt.Errorf("reseed of the ready context failed")
	}
	if err != nil {
		p.cfg.Logger.Warn("ready context not used: its reseed failed; starting a fresh one", "sandbox", sb.ID(), "err", err)
		a.CloseContext(context.WithoutCancel(ctx), id)
		return "", nil
	}
	return id, nil
}
