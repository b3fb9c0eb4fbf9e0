package agent

import (
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/creack/pty"

	"github.com/airlockhq/airlock/agent/protocol"
)

// terminal is the pseudo-terminal of a program started with a PTY: the
// agent holds its master side.
type terminal struct {
	master *os.File

	mu         sync.Mutex
	cols, rows int // the size last set
}

func (t *terminal) resize(cols, rows int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pty.Setsize(t.master, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
	t.cols, t.rows = cols, rows
}

// size is the terminal's size for a process list; nil for no terminal.
func (t *terminal) size() *protocol.PTYSize {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return &protocol.PTYSize{Cols: t.cols, Rows: t.rows}
}

// execPTY starts a program on a new pseudo-terminal of the asked size, as
// the leader of a session of its own with the terminal as its
// controlling terminal. What it writes comes as stdout; stdin frames are
// typed into the terminal (an exec on a PTY always takes input); resize
// frames change the terminal's size.
func (s *server) execPTY(stream uint32, req *protocol.ExecRequest, cmd *exec.Cmd) {
	master, tty, err := pty.Open()
	if err != nil {
		s.startFailed(stream, err)
		return
	}
	t := &terminal{master: master}
	t.resize(req.PTY.Cols, req.PTY.Rows)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	// A session of its own (its PID is its process group, so signals to
	// the group work as for any exec), with the terminal as its
	// controlling terminal (child's fd 0).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if !hasEnv(cmd.Env, "TERM") {
		cmd.Env = append(cmd.Env, "TERM=xterm-256color")
	}
	p := &program{tty: t, stdin: newStdinQueue()}
	s.procs.mu.Lock() // hold the reaper off until the PID is tracked
	err = cmd.Start()
	tty.Close()
	if err != nil {
		s.procs.mu.Unlock()
		master.Close()
		s.startFailed(stream, err)
		return
	}
	s.adopt(stream, req, p, cmd)

	// The master is read and written by two goroutines; it is closed
	// once the reader has returned (by pipeOut, at EOF or EIO when the
	// terminal's last user is gone, or by supervise after drainGrace).
	go p.feedStdin(master)
	var wg sync.WaitGroup
	wg.Add(1)
	go pipeOut(&wg, p, protocol.TStdout, master)
	go s.supervise(p, cmd, &wg, master, nil, req.TimeoutMS)
}

func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)] == key && kv[len(key)] == '=' {
			return true
		}
	}
	return false
}
