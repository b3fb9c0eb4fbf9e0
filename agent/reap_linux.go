package agent

import (
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// startReaper reaps orphaned processes when the agent is PID 1: programs
// that daemonised are re-parented to it and would otherwise stay zombies,
// counting against the sandbox's process limit. Children that os/exec is
// waiting for are left alone, so their exit statuses are not stolen.
func (s *core) startReaper() {
	if os.Getpid() != 1 {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGCHLD)
	go func() {
		for range ch {
			s.reapOrphans()
		}
	}()
}

func (s *core) reapOrphans() {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces and parens).
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[0] != "Z" || f[1] != "1" {
			continue
		}
		s.procs.mu.Lock()
		_, tracked := s.procs.procs[pid]
		if !tracked {
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
		s.procs.mu.Unlock()
	}
}
