package dockerfile

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error Parse returns wraps ErrInvalid (and one
// of the others where it applies); a build that fails in a step returns
// a *StepError wrapping ErrStepFailed.
var (
	// ErrInvalid: the Dockerfile, its build arguments or its context
	// cannot be built (a client error: 400).
	ErrInvalid = errors.New("invalid Dockerfile")
	// ErrUnsupported: an instruction, flag or form this builder does
	// not implement. It is refused, never ignored.
	ErrUnsupported = errors.New("unsupported Dockerfile instruction")
	// ErrTooLarge: the Dockerfile is bigger than the limit, or has more
	// instructions or steps than allowed.
	ErrTooLarge = errors.New("Dockerfile over a limit")
	// ErrEscape: a COPY or ADD source leaves the build context (by
	// "..", an absolute path or a symlink).
	ErrEscape = errors.New("source outside the build context")
	// ErrStepFailed: a RUN step exited non-zero, or a COPY, ADD or
	// WORKDIR step could not be applied.
	ErrStepFailed = errors.New("build step failed")
	// ErrSecret: a step left a credential in the image or its
	// environment; the build is refused.
	ErrSecret = errors.New("build output holds a credential")
)

// LineError is an error at one instruction of the Dockerfile.
type LineError struct {
	Line        int    // 1-based line of the instruction's start; 0 if none
	Instruction string // upper case, e.g. "RUN"; "" if none
	Msg         string
	Err         error // ErrInvalid, ErrUnsupported, ErrTooLarge or ErrEscape
}

func (e *LineError) Error() string {
	switch {
	case e.Line > 0 && e.Instruction != "":
		return fmt.Sprintf("line %d: %s: %s", e.Line, e.Instruction, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// Unwrap returns the sentinel and ErrInvalid, so errors.Is finds both.
func (e *LineError) Unwrap() []error {
	if e.Err == nil || e.Err == ErrInvalid {
		return []error{ErrInvalid}
	}
	return []error{e.Err, ErrInvalid}
}

// StepError is a build step that failed: its line, its instruction and,
// for RUN, the program's exit status.
type StepError struct {
	Step     int    // 1-based index of the instruction
	Line     int    // 1-based line in the Dockerfile
	Text     string // the instruction as written
	ExitCode int    // RUN's exit status; -1 when the step did not run to an exit
	Msg      string
	Err      error
}

func (e *StepError) Error() string {
	if e.ExitCode >= 0 {
		return fmt.Sprintf("line %d: %s: exit code %d", e.Line, e.Text, e.ExitCode)
	}
	return fmt.Sprintf("line %d: %s: %s", e.Line, e.Text, e.Msg)
}

// Unwrap returns ErrStepFailed and the cause.
func (e *StepError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrStepFailed}
	}
	return []error{ErrStepFailed, e.Err}
}
