package guard

import (
	"context"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/airlockhq/airlock"
)

// Config bounds a Guard.
type Config struct {
	// MaxBytes is the largest code checked; larger code gets the finding
	// guard-limit and nothing else (airlock.MaxCodeBytes plus room for a
	// session's command).
	MaxBytes int
	// Timeout bounds one check; a check that takes longer is abandoned
	// with the finding guard-timeout (10 s: a megabyte of Python takes
	// about a second of CPU, several on a loaded machine).
	Timeout time.Duration
	// MaxDepth bounds how deep shell inside shell (bash -c '...', eval,
	// os.system("...")) is parsed again (4).
	MaxDepth int
	// MaxFindings bounds the findings of one check (50); the rest are
	// dropped after a last finding guard-limit.
	MaxFindings int
	// MaxInflightBytes bounds the code being checked at once, and so the
	// memory of the parsers (a megabyte of Python takes about 80 MB in
	// tree-sitter's tree, a deeply nested one in mvdan.cc/sh up to a few
	// hundred MB of stack); a check waits for room within its Timeout
	// (16 MiB).
	MaxInflightBytes int64
}

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if c.MaxBytes == 0 {
		c.MaxBytes = airlock.MaxCodeBytes + 64<<10
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.MaxDepth == 0 {
		c.MaxDepth = 4
	}
	if c.MaxFindings == 0 {
		c.MaxFindings = 50
	}
	if c.MaxInflightBytes == 0 {
		c.MaxInflightBytes = 16 << 20
	}
	if c.MaxInflightBytes < int64(c.MaxBytes) {
		return fmt.Errorf("guard: MaxInflightBytes %d is less than MaxBytes %d", c.MaxInflightBytes, c.MaxBytes)
	}
	if c.MaxBytes < 0 || c.Timeout < 0 || c.MaxDepth < 0 || c.MaxFindings < 0 {
		return fmt.Errorf("guard: negative bound in config")
	}
	return nil
}

// Guard checks code. It is safe for concurrent use.
type Guard struct {
	cfg      Config
	inflight *semaphore.Weighted
}

// New returns a guard.
func New(cfg Config) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Guard{cfg: cfg, inflight: semaphore.NewWeighted(cfg.MaxInflightBytes)}, nil
}

// Check returns what the guard finds in code of a language, in the order
// of the code (never nil). Languages it has no parser for have no
// findings. It never fails: a bound that is hit is a finding
// (guard-limit, guard-timeout), and so is code that does not parse
// (guard-parse-error, severity info: what did parse was checked). A
// command given as an argv is checked by CheckArgv.
func (g *Guard) Check(ctx context.Context, lang airlock.Language, code string) []airlock.GuardFinding {
	return g.Inspect(ctx, lang, code).Findings
}

// Inspect is Check that also returns the imports of Python code, from
// the same parse.
func (g *Guard) Inspect(ctx context.Context, lang airlock.Language, code string) Report {
	return g.check(ctx, lang, code, func(a *analysis) {
		switch lang {
		case airlock.Bash:
			a.shell(code, pos{}, 0)
		case airlock.Python:
			a.python(code, pos{}, 0)
		case airlock.Node:
			a.javascript(code, pos{}, 0)
		case airlock.SQL:
			a.sql(code)
		}
	})
}

// CheckArgv returns what the guard finds in a command given as an argv
// (a session exec's cmd, language airlock.Command): no shell reads it,
// so each argument is one word as it is; shell or other code it hands to
// an interpreter (bash -c, python -c, ...) is parsed and checked. The
// findings are placed at line 1, column 1 of the argv joined by NULs, as
// the execution records it.
func (g *Guard) CheckArgv(ctx context.Context, argv []string) []airlock.GuardFinding {
	return g.check(ctx, airlock.Command, strings.Join(argv, "\x00"), func(a *analysis) {
		a.shellArgv(argv, pos{1, 1}, 0)
	}).Findings
}

// PythonImports returns the imports of Python code without checking it
// (for a run the guard does not check: its tenant's policy is off), under
// the guard's bounds.
func (g *Guard) PythonImports(ctx context.Context, code string) Imports {
	return g.check(ctx, airlock.Python, code, func(a *analysis) {
		a.importsOnly = true
		a.python(code, pos{}, 0)
	}).Imports
}

// check runs one analysis of code under the guard's bounds.
func (g *Guard) check(ctx context.Context, lang airlock.Language, code string, analyse func(a *analysis)) Report {
	c := newCollector(code, g.cfg.MaxFindings)
	if len(code) > g.cfg.MaxBytes {
		c.add(RuleLimit, 1, 1, fmt.Sprintf("the code is %d bytes; the guard checks at most %d", len(code), g.cfg.MaxBytes))
		return Report{Findings: c.result()}
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	weight := max(int64(len(code)), 4<<10)
	if err := g.inflight.Acquire(ctx, weight); err != nil {
		c.add(RuleTimeout, 1, 1, fmt.Sprintf("the guard was busy with other code for %s", g.cfg.Timeout))
		return Report{Findings: c.result()}
	}
	a := &analysis{ctx: ctx, c: c, maxDepth: g.cfg.MaxDepth}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer g.inflight.Release(weight) // held until the parsers are done, also past a timeout
		defer func() {
			// A parser that panics on hostile input must not take the
			// server down: the check ends with what it found so far.
			if r := recover(); r != nil {
				c.add(RuleParseError, 1, 1, fmt.Sprintf("the %s parser failed: %v", lang, r))
			}
		}()
		analyse(a)
	}()
	var imports Imports
	select {
	case <-done:
		imports = a.imports
	case <-ctx.Done():
		// The parsers and walks stop at the context's end; they are
		// linear in bounded input, so what is left ends soon.
		c.add(RuleTimeout, 1, 1, fmt.Sprintf("the check took longer than %s and was abandoned", g.cfg.Timeout))
		c.close()
	}
	return Report{Findings: c.result(), Imports: imports}
}

// analysis is one check of one piece of code.
type analysis struct {
	ctx      context.Context
	c        *collector
	maxDepth int
	// imports are those of the Python code checked (not of Python
	// nested in it); importsOnly: look for nothing else.
	imports     Imports
	importsOnly bool
}

// pos is a place in the code as sent (1-based); the zero pos means "not
// nested": findings are reported where they are.
type pos struct{ line, col int }

func (p pos) set() bool { return p.line > 0 }

// at is where a finding at line, col of nested code is reported: at the
// outer string, when there is one.
func (p pos) at(line, col int) (int, int) {
	if p.set() {
		return p.line, p.col
	}
	return line, col
}

// stopped reports whether the check's time is up, or no finding can be
// added any more.
func (a *analysis) stopped() bool { return a.ctx.Err() != nil || a.c.isFull() }
