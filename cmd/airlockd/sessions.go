package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/run"
	"github.com/airlockhq/airlock/service/session"
)

// sessionOptions are the operator's session settings.
type sessionOptions struct {
	sizes          sizeFlag
	timeout        time.Duration
	maxLifetime    time.Duration
	idleTimeout    time.Duration
	execTimeout    time.Duration
	maxExecTimeout time.Duration
	max            int
	maxPerTenant   int
	warm           string
}

func (o *sessionOptions) register(fs *flag.FlagSet) {
	o.sizes = sizeFlag{}
	fs.Var(o.sizes, "session-size", "limits of a session size, NAME=CPUS,MEMORY_MIB,DISK_MB (small, medium, large; repeatable; defaults 1,1024,2147 / 2,2048,5368 / 4,4096,10737)")
	fs.DurationVar(&o.timeout, "session-timeout", 10*time.Minute, "session lifetime when a request names none")
	fs.DurationVar(&o.maxLifetime, "session-max-lifetime", 12*time.Hour, "most any session may live from its creation, extensions included")
	fs.DurationVar(&o.idleTimeout, "session-idle-timeout", 10*time.Minute, "a session nothing ran in for this long is destroyed (a request may ask for another value)")
	fs.DurationVar(&o.execTimeout, "session-exec-timeout", time.Minute, "wall time of a session exec or cell when the request names none")
	fs.DurationVar(&o.maxExecTimeout, "session-max-exec-timeout", time.Hour, "longest wall time a session exec or cell may ask for")
	fs.IntVar(&o.max, "max-sessions", 32, "live sessions on this node")
	fs.IntVar(&o.maxPerTenant, "max-sessions-per-tenant", 8, "live sessions of one tenant: the default of the sessions quota unless --quota sessions=N names one")
	fs.StringVar(&o.warm, "warm-sessions", "python-ds/small", "image/size pairs whose sessions are readied ahead (base snapshot, pool members), comma-separated; empty for none")
}

// sizeFlag collects --session-size NAME=CPUS,MEMORY_MIB,DISK_MB.
type sizeFlag map[airlock.SessionSize]session.Size

func (f sizeFlag) String() string {
	var out []string
	for k, v := range f {
		out = append(out, fmt.Sprintf("%s=%g,%d,%d", k, v.CPUs, v.MemoryBytes>>20, v.DiskBytes/1000/1000))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func (f sizeFlag) Set(v string) error {
	name, spec, ok := strings.Cut(v, "=")
	parts := strings.Split(spec, ",")
	if !ok || len(parts) != 3 || !airlock.SessionSize(name).Valid() {
		return fmt.Errorf("want NAME=CPUS,MEMORY_MIB,DISK_MB with NAME small, medium or large")
	}
	cpus, err1 := strconv.ParseFloat(parts[0], 64)
	mem, err2 := strconv.ParseInt(parts[1], 10, 64)
	disk, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || cpus <= 0 || mem <= 0 || disk <= 0 {
		return fmt.Errorf("CPUS, MEMORY_MIB and DISK_MB must be positive numbers")
	}
	pids := session.DefaultSizes[airlock.SessionSize(name)].Pids
	f[airlock.SessionSize(name)] = session.Size{CPUs: cpus, MemoryBytes: mem << 20, DiskBytes: disk * 1000 * 1000, Pids: pids}
	return nil
}

// sessionStore is what the session manager keeps its records in:
// tenants, and sessions with their idempotency keys.
type sessionStore interface {
	airlock.Store
	airlock.SessionStore
}

// newSessions makes the session manager.
func newSessions(o sessionOptions, keep session.KeepConfig, prov *provision.Provisioner, runner *run.Runner, images airlock.ImageResolver, store sessionStore, eg airlock.Egress, egLog airlock.EgressStore, logger *slog.Logger) (*session.Manager, error) {
	return session.New(session.Config{
		Provisioner:    prov,
		Runner:         runner,
		Images:         images,
		Store:          store,
		Sessions:       store,
		Egress:         eg,
		EgressLog:      egLog,
		Sizes:          o.sizes,
		DefaultTimeout: o.timeout,
		MaxLifetime:    o.maxLifetime,
		IdleTimeout:    o.idleTimeout,
		ExecTimeout:    o.execTimeout,
		MaxExecTimeout: o.maxExecTimeout,
		Keep:           keep,
		Logger:         logger,
	})
}

// recoverSessions takes back the sessions an earlier run left live: their
// sandboxes are reattached, or the sessions ended with the reason.
func recoverSessions(ctx context.Context, m *session.Manager, logger *slog.Logger) error {
	start := time.Now()
	rep, err := m.Recover(ctx)
	if rep.Reattached+rep.Ended+rep.Paused > 0 {
		logger.Info("sessions recovered", "reattached", rep.Reattached, "ended", rep.Ended, "paused", rep.Paused,
			"programs_adopted", rep.Adopted, "runs_interrupted", rep.Interrupted, "took", time.Since(start))
	}
	if err != nil {
		// A session whose sandbox could not be taken back is ended and
		// recorded, which is no error; what is left is a store that
		// failed. The start stops then, before the reconciler would end
		// sandboxes whose sessions are still live in the store: the
		// next start takes them back.
		return fmt.Errorf("recovering sessions (their sandboxes are left running for the next start): %w", err)
	}
	return nil
}

// warmSessions readies the image/size pairs of --warm-sessions.
func warmSessions(ctx context.Context, o sessionOptions, m *session.Manager, logger *slog.Logger) error {
	for _, w := range strings.Split(o.warm, ",") {
		if w = strings.TrimSpace(w); w == "" {
			continue
		}
		name, size, ok := strings.Cut(w, "/")
		if !ok || !airlock.SessionSize(size).Valid() {
			return fmt.Errorf("bad --warm-sessions pair %q (want image/size, size small, medium or large)", w)
		}
		if err := m.Warm(ctx, name, airlock.SessionSize(size)); err != nil {
			logger.Warn("not readying sessions of an image: it is not available", "pair", w, "err", err)
		}
	}
	return nil
}

// detachSessions leaves every live session running for the next start.
func detachSessions(m *session.Manager, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Detach(ctx); err != nil {
		logger.Error("leaving sessions for the next start", "err", err)
	}
}

// closeSessions destroys every live session (end reason shutdown). It is
// safe to call more than once.
func closeSessions(m *session.Manager, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		logger.Error("ending sessions", "err", err)
	}
}
