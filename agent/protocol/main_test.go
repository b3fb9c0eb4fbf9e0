package protocol_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run if goroutines started by the tests outlive them.
func TestMain(m *testing.M) {
	base, _ := goroutines()
	code := m.Run()
	if code == 0 {
		if err := checkGoroutines(base, 5*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func checkGoroutines(base int, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		n, stacks := goroutines()
		if n <= base {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d goroutines left over after the tests (%d before):\n%s", n, base, stacks)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// goroutines counts the goroutines, leaving out the signal loop that the
// fuzzing engine starts, and returns their stacks.
func goroutines() (int, string) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var keep []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "os/signal.loop") {
			keep = append(keep, g)
		}
	}
	return len(keep), strings.Join(keep, "\n\n")
}
