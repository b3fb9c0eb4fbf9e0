package gvisor

import (
	"bytes"
	"fmt"
	"os"
	"strconv"

	"github.com/airlockhq/airlock"
)

var _ airlock.Prober = (*Sandbox)(nil)

// Alive reports, without a round trip to the agent, whether the sandbox
// can still serve: it has not exited, its agent's connection is open, and
// its sandbox process and gofer run (one read of /proc/<pid>/stat each:
// a process killed a moment ago is gone or a zombie there before the
// watcher has seen it exit). A pool checks each member with it before
// handing it out.
func (s *Sandbox) Alive() error {
	select {
	case <-s.exited:
		return fmt.Errorf("gvisor: sandbox %s exited: %w", s.id, airlock.ErrSandboxGone)
	default:
	}
	if s.agent != nil {
		select {
		case <-s.agent.Done():
			return fmt.Errorf("gvisor: sandbox %s: agent connection closed: %w", s.id, airlock.ErrSandboxGone)
		default:
		}
	}
	for _, pid := range s.pids {
		if !running(pid) {
			return fmt.Errorf("gvisor: sandbox %s: process %d is gone: %w", s.id, pid, airlock.ErrSandboxGone)
		}
	}
	return nil
}

// running reports whether process pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	state := b[i+2]
	return state != 'Z' && state != 'X'
}
