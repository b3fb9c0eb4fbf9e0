// Package run runs one program, or one cell of a code context, in a
// sandbox that a caller holds, and records it. It is the one place that
// decides, for one-shot runs and session execs and cells alike:
//
//   - the guard: every run's code is checked (package guard) under the
//     tenant's policy before its record is made (Screen, which Begin
//     calls for a record not screened yet); under block, code with a
//     finding that blocks is recorded as blocked and refused, and
//     nothing runs; the findings are the execution's;
//   - the record: an execution row written when the run starts (status
//     running) and finished with its outcome, the backend, how the
//     sandbox was obtained and the time of each phase;
//   - the hand-in: files put into the sandbox before the program starts;
//   - the deadline and the kill: the agent kills the program's process
//     group at its timeout; if it has not reported the end killGrace
//     later, the host sends SIGKILL to the group itself and, after one
//     more grace, records the program as timed out with exit code 137;
//   - output caps: the first OutputBytes of each stream are kept and the
//     rest counted as truncated;
//   - the exit code, timed-out and out-of-memory flags, peak memory and
//     network attempts;
//   - what an interrupted run becomes: a client that goes away kills its
//     program; a server that detaches from the sandbox at a clean stop
//     leaves the program running and its record open, for the next start
//     to adopt (Adopt) when the agent kept its output.
//
// It speaks to sandboxes through airlock.Sandbox and the agent protocol,
// and to records through airlock.Store; it does not choose, make or
// destroy sandboxes (package provision does).
package run
