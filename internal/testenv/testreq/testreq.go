// Package testreq is how tests say what they need from the machine and
// how they wait for a condition. It imports nothing of Airlock, so every
// test can use it, even the internal tests of a package that
// internal/testenv itself depends on.
//
// A test that lacks a machine feature (root, runsc, built images, the
// agent binary, a tool such as mkfs.ext4, a cgroup controller, a kernel
// feature) calls Skip with the reason. Normally that skips the test; with
// AIRLOCK_TEST_REQUIRE=1 in the environment (scripts/test.sh sets it, so
// CI does) it fails the test with the same reason, so a suite that runs
// nothing can never pass. A test that does not apply by design, whatever
// the machine (a case a backend cannot run, a test that is opt-in),
// calls NotApplicable instead, which always skips.
package testreq

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// Var is the environment variable that turns missing requirements into
// failures.
const Var = "AIRLOCK_TEST_REQUIRE"

// Required reports whether a missing requirement fails the test: Var is
// set to anything but "", "0" or "false".
func Required() bool {
	switch os.Getenv(Var) {
	case "", "0", "false":
		return false
	}
	return true
}

// Skip skips the test for a missing machine feature, or fails it with
// the same reason when Required.
func Skip(t testing.TB, reason string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s (%s=%s: a missing requirement fails the test; run with %s=0 to skip instead)", reason, Var, os.Getenv(Var), Var)
	}
	t.Skip(reason)
}

// Skipf is Skip with a format.
func Skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	Skip(t, fmt.Sprintf(format, args...))
}

// NotApplicable always skips: the test does not apply here by design,
// never because the machine lacks something. The reason must say why.
func NotApplicable(t testing.TB, reason string) {
	t.Helper()
	t.Skip(reason)
}

// Poll calls cond until it returns true or timeout has passed, waiting a
// little longer after each false (from 1 ms up to 100 ms). It reports
// whether cond became true; cond is always called at least once, and once
// more at the deadline.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	wait := time.Millisecond
	for {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(wait, left))
		wait = min(wait*2, 100*time.Millisecond)
	}
}

// Eventually waits until cond returns true, polling as Poll does, and
// fails the test if it does not within timeout. what names the condition
// for the failure message ("waited 5s for <what>").
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	if !Poll(timeout, cond) {
		t.Fatalf("waited %v for %s; it did not happen", time.Since(start).Round(time.Millisecond), what)
	}
}
