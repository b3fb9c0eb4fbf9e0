package agent

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// HardenInit protects the agent from the programs it runs when it is its
// sandbox's first process (PID 1), as under every backend. Those programs
// run as the same user as the agent, so without this they could:
//
//   - read and write the agent's memory and open its descriptors through
//     /proc/1 (mem, fd/0, fd/1: the host's protocol stream) or ptrace it.
//     A process that is not dumpable is out of their reach; its children
//     become dumpable again when they exec.
//   - end or stop it with a signal. Linux drops SIGKILL and SIGSTOP sent
//     to a namespace's init from inside, and signals it has no handler
//     for; but the Go runtime handles most signals, and exits on
//     SIGTERM, SIGINT and SIGHUP or crashes on SIGQUIT, SIGABRT and the
//     fault signals when another process sends them, and gVisor's kernel
//     lets the stop signals through to a default action. Taking them
//     here turns those into no-ops. (Real faults still crash the agent,
//     and programs it starts get default handlers back when they exec.)
//     SIGKILL and SIGSTOP cannot be taken: under gVisor, which does not
//     shield a namespace's init from them, a program can still end or
//     stop the agent, and with it its own sandbox.
//
// It is a convenience, not a boundary: the agent is inside the attacker's
// box, and the host treats all it says as untrusted.
func HardenInit() {
	if os.Getpid() != 1 {
		return
	}
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT,
		syscall.SIGABRT, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGSTKFLT, syscall.SIGSYS,
		syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	go func() {
		for range ch {
		}
	}()
}
