package airlock

// What a session does when its timeout or idle timeout passes, and
// whether a request to it while paused resumes it (issue 25).

// On-timeout actions (SessionLifecycle.OnTimeout).
const (
	OnTimeoutEnd   = "end"   // the session ends (the default)
	OnTimeoutPause = "pause" // the session is paused: saved to disk, CPU and memory freed
)

// SessionLifecycle is the "lifecycle" of a session create request and of
// a session: on_timeout says what its timeout and idle timeout do,
// auto_resume whether any request to it while paused resumes it.
type SessionLifecycle struct {
	OnTimeout  string `json:"on_timeout,omitempty"`
	AutoResume bool   `json:"auto_resume,omitempty"`
}

// Pauses reports whether a session with lifecycle l is paused, not ended,
// when its timeout or idle timeout passes.
func (l *SessionLifecycle) Pauses() bool { return l != nil && l.OnTimeout == OnTimeoutPause }

// Resumes reports whether a request to a paused session with lifecycle l
// resumes it.
func (l *SessionLifecycle) Resumes() bool { return l != nil && l.AutoResume }

// Validate checks on_timeout; auto_resume needs nothing.
func (l *SessionLifecycle) Validate() error {
	if l == nil {
		return nil
	}
	switch l.OnTimeout {
	case "", OnTimeoutEnd, OnTimeoutPause:
	default:
		return Problem(EINVALID, "invalid-lifecycle", "lifecycle.on_timeout must be %q or %q, not %q", OnTimeoutPause, OnTimeoutEnd, clip(l.OnTimeout, 40))
	}
	if l.OnTimeout == "" {
		l.OnTimeout = OnTimeoutEnd
	}
	return nil
}
