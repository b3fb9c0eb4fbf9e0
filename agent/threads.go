package agent

import (
	"runtime"
	"sync"
)

// ReserveThreads makes the Go runtime start n OS threads now and keep
// them idle for later. The agent runs as the same user as the code it
// runs, so the sandbox's process limit (RLIMIT_NPROC, which counts
// threads) is shared: code that forks up to the limit would leave the
// agent unable to start the thread it needs for its next blocking call,
// and the runtime dies when it cannot. Threads started now are reused
// instead (the runtime parks idle threads rather than ending them).
func ReserveThreads(n int) {
	var locked, release sync.WaitGroup
	locked.Add(n)
	release.Add(1)
	for range n {
		go func() {
			runtime.LockOSThread() // this goroutine has a thread of its own
			locked.Done()
			release.Wait()
			runtime.UnlockOSThread() // the thread goes back to the runtime, idle
		}()
	}
	locked.Wait()
	release.Done()
}
