package run

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/guard"
)

// Config configures a Runner.
type Config struct {
	// Store keeps the execution records.
	Store airlock.Store
	// Guard checks code before it runs (Screen); nil is the guard of
	// package guard with its default bounds.
	Guard Checker
	// Metrics registers the runner's Prometheus series; nil keeps them in
	// a private registry.
	Metrics prometheus.Registerer
	// KillGrace is how long past a program's timeout the host waits for
	// the agent to report the kill it does itself, before it sends SIGKILL
	// to the program's group, and then how long it waits for that (2 s).
	KillGrace time.Duration
	// CellSlack is how long past a cell's timeout the host waits for the
	// agent's answer (the agent interrupts the cell at its timeout and
	// kills the interpreter a few seconds later if that does not take);
	// 15 s.
	CellSlack time.Duration
	// StoreRetry is how long the end of a run keeps trying to write its
	// record while the store is busy (30 s).
	StoreRetry time.Duration

	// Watchdog is the node's abuse monitor: one-shot runs are watched
	// while they run (sessions watch their sandbox for its lifetime),
	// output is reported to it, and a run whose sandbox it killed ends
	// by abuse:<detector>. Nil watches nothing.
	Watchdog airlock.Watchdog

	Logger *slog.Logger
	Now    func() time.Time
	NewID  func() string
}

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if c.Store == nil {
		return fmt.Errorf("run: a store is required")
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.NewRegistry()
	}
	if c.Guard == nil {
		g, err := guard.New(guard.Config{})
		if err != nil {
			return err
		}
		c.Guard = g
	}
	if c.KillGrace <= 0 {
		c.KillGrace = 2 * time.Second
	}
	if c.CellSlack <= 0 {
		c.CellSlack = 15 * time.Second
	}
	if c.StoreRetry <= 0 {
		c.StoreRetry = 30 * time.Second
	}
	if c.Watchdog == nil {
		c.Watchdog = airlock.NoWatchdog{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewID == nil {
		c.NewID = airlock.NewID
	}
	return nil
}
