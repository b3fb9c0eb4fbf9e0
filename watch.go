package airlock

import (
	"context"
	"errors"
	"time"
)

// Watching a session: the output of its execs and cells as it happens,
// for a client other than the one that started them (the web console
// shows a session's running command this way).

// Types of SessionEvent.
const (
	EventStart  = "start"  // an exec or a cell began
	EventStdout = "stdout" // output
	EventStderr = "stderr"
	EventEnd    = "end" // it ended
)

// SessionEvent is one event of a session's live output.
type SessionEvent struct {
	// Type is one of the Event* values (the event's name on the wire).
	Type string `json:"-"`
	// Run tells apart the execs and cells running at once: every event
	// of one has the same Run.
	Run int64 `json:"run"`
	// Kind is exec or cell (start).
	Kind string `json:"kind,omitempty"`
	// ExecutionID is the record of an exec (start, end) or a cell (end).
	ExecutionID string `json:"execution_id,omitempty"`
	PID         int    `json:"pid,omitempty"`
	ContextID   string `json:"context_id,omitempty"`
	// Command is an exec's command line, or a cell's first line, cut to
	// 200 characters (start).
	Command   string     `json:"command,omitempty"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	// Data is a chunk of output (stdout, stderr).
	Data []byte `json:"-"`
	// End: the exit code (for a cell, 0, or 1 when it raised), whether
	// it timed out, how long it took, and what failed (a cell's
	// exception name, or the service's problem).
	ExitCode   *int   `json:"exit_code,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
	Error      string `json:"error,omitempty"`
	// Replay marks events of a run that was under way when the watch
	// began, sent from what was kept of it; EarlierDropped says that
	// output before the kept part is missing.
	Replay         bool `json:"replay,omitempty"`
	EarlierDropped bool `json:"earlier_dropped,omitempty"`
}

// ErrWatchDropped ends a feed whose watcher fell behind: it did not take
// its events as fast as they came.
var ErrWatchDropped = &Error{Code: EUNAVAILABLE, Type: "watch-dropped", Message: "the watcher fell behind the session's output and was dropped"}

// SessionFeed is one watch of a session.
type SessionFeed interface {
	// Next waits for the next event. It returns ctx's error when ctx
	// ends, and ErrWatchDropped when the watcher fell behind.
	Next(ctx context.Context) (SessionEvent, error)
	// Close ends the watch.
	Close()
}

// SessionWatcher is implemented by session services whose sessions can
// be watched.
type SessionWatcher interface {
	// WatchSession starts a watch of the tenant's session: first the
	// start and kept output of the execs and cells under way (Replay),
	// then everything as it happens. Another tenant's session is
	// ENOTFOUND, as everywhere.
	WatchSession(ctx context.Context, tenant *Tenant, id string) (SessionFeed, error)
}

// IsWatchDropped reports whether err ended a feed for falling behind.
func IsWatchDropped(err error) bool { return errors.Is(err, ErrWatchDropped) }
