package testreq_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// childEnv names what TestChild does when this test binary runs it as a
// child; without it TestChild does nothing.
const childEnv = "TESTREQ_CHILD"

// TestChild is run by the other tests in a child process of this test
// binary, so that they see what go test reports for it.
func TestChild(t *testing.T) {
	switch os.Getenv(childEnv) {
	case "skip":
		testreq.Skip(t, "skipped: the machine has no frobnicator")
		t.Log("after Skip")
	case "skipf":
		testreq.Skipf(t, "skipped: %s not installed", "mkfs.frob")
		t.Log("after Skipf")
	case "not-applicable":
		testreq.NotApplicable(t, "does not apply: this backend shares the host's kernel")
		t.Log("after NotApplicable")
	}
}

// child runs TestChild in a child process with what set and Var set to
// require (left out of the environment when require is "unset"), and
// returns its output and whether it passed.
func child(t *testing.T, what, require string) (string, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.v", "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, testreq.Var+"=") && !strings.HasPrefix(kv, childEnv+"=") && !strings.HasPrefix(kv, "GORACE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// Under -race the child would wait a second at exit for late reports.
	cmd.Env = append(cmd.Env, childEnv+"="+what, "GORACE=atexit_sleep_ms=0")
	if require != "unset" {
		cmd.Env = append(cmd.Env, testreq.Var+"="+require)
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run the child: %v", err)
	}
	return string(out), err == nil
}

func TestSkip(t *testing.T) {
	for _, tc := range []struct {
		what, reason, after string
	}{
		{"skip", "skipped: the machine has no frobnicator", "after Skip"},
		{"skipf", "skipped: mkfs.frob not installed", "after Skipf"},
	} {
		for _, require := range []string{"unset", "", "0", "false"} {
			t.Run(fmt.Sprintf("%s/%s=%q", tc.what, testreq.Var, require), func(t *testing.T) {
				t.Parallel()
				out, ok := child(t, tc.what, require)
				if !ok || !strings.Contains(out, "--- SKIP: TestChild") || !strings.Contains(out, tc.reason) {
					t.Fatalf("want TestChild skipped with %q; passed %v, output:\n%s", tc.reason, ok, out)
				}
				if strings.Contains(out, tc.after) {
					t.Errorf("the test went on after the skip:\n%s", out)
				}
			})
		}
		for _, require := range []string{"1", "true", "yes"} {
			t.Run(fmt.Sprintf("%s/%s=%q", tc.what, testreq.Var, require), func(t *testing.T) {
				t.Parallel()
				out, ok := child(t, tc.what, require)
				if ok || !strings.Contains(out, "--- FAIL: TestChild") || !strings.Contains(out, tc.reason) || !strings.Contains(out, testreq.Var) {
					t.Fatalf("want TestChild failed with %q and a word on %s; passed %v, output:\n%s", tc.reason, testreq.Var, ok, out)
				}
				if strings.Contains(out, "--- SKIP") || strings.Contains(out, tc.after) {
					t.Errorf("the test skipped or went on after the failure:\n%s", out)
				}
			})
		}
	}
}

// NotApplicable skips whatever the variable says.
func TestNotApplicable(t *testing.T) {
	for _, require := range []string{"unset", "0", "1"} {
		t.Run(fmt.Sprintf("%s=%q", testreq.Var, require), func(t *testing.T) {
			t.Parallel()
			out, ok := child(t, "not-applicable", require)
			if !ok || !strings.Contains(out, "--- SKIP: TestChild") || !strings.Contains(out, "this backend shares the host's kernel") {
				t.Fatalf("want TestChild skipped; passed %v, output:\n%s", ok, out)
			}
		})
	}
}

func TestRequired(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "1": true, "true": true, "yes": true} {
		t.Setenv(testreq.Var, v)
		if got := testreq.Required(); got != want {
			t.Errorf("Required with %s=%q: %v, want %v", testreq.Var, v, got, want)
		}
	}
}

// fakeTB records a failure instead of ending the goroutine.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestEventually(t *testing.T) {
	var n atomic.Int32
	go func() {
		for i := 0; i < 5; i++ {
			time.Sleep(time.Millisecond) // the condition comes true in a while
			n.Add(1)
		}
	}()
	f := &fakeTB{TB: t}
	calls := 0
	testreq.Eventually(f, 10*time.Second, "five ticks", func() bool { calls++; return n.Load() == 5 })
	if f.failed != "" {
		t.Fatalf("Eventually failed: %s", f.failed)
	}
	if calls < 2 {
		t.Errorf("the condition was true at once (%d calls): the test proves nothing", calls)
	}
}

func TestEventuallyTimesOut(t *testing.T) {
	f := &fakeTB{TB: t}
	start := time.Now()
	calls := 0
	testreq.Eventually(f, 200*time.Millisecond, "the moon to turn blue", func() bool { calls++; return false })
	took := time.Since(start)
	if !strings.Contains(f.failed, "the moon to turn blue") || !strings.Contains(f.failed, "waited") {
		t.Errorf("failure message %q does not say what it waited for", f.failed)
	}
	if took < 200*time.Millisecond || took > 5*time.Second {
		t.Errorf("gave up after %v, want about 200ms", took)
	}
	// 1+2+4+...+64 ms, then 100 ms steps: about 8 calls in 200 ms, and one
	// at the deadline.
	if calls < 4 {
		t.Errorf("polled %d times in 200ms", calls)
	}
}

func TestPoll(t *testing.T) {
	if !testreq.Poll(0, func() bool { return true }) {
		t.Error("Poll with no time left did not call the condition")
	}
	if testreq.Poll(10*time.Millisecond, func() bool { return false }) {
		t.Error("Poll of a false condition reported true")
	}
}
