// Command airlock-agent runs inside every sandbox as its first process. It
// speaks the agent protocol on its stdin and stdout (runsc wires those to
// the host) and, once the host that started it is gone, on the channel the
// host set (see agent.Run). It logs to stderr. Build it static:
// CGO_ENABLED=0.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/airlockhq/airlock/agent"
	"github.com/airlockhq/airlock/backend/microvm/guest"
	"github.com/airlockhq/airlock/backend/namespaces/nsinit"
)

// build is set at link time (-ldflags "-X main.build=...").
var build = "dev"

type stdio struct {
	io.Reader
	io.Writer
}

func main() {
	guest.RunIfAsked()       // PID 1 of a microVM guest: execs the agent, never returns
	nsinit.RunIfAsked()      // the namespaces backend's init stage: execs the agent, never returns
	agent.RunHelperIfAsked() // starting a program under a memory limit: never returns
	agent.HardenInit()
	agent.ReserveThreads(16) // before any code can use up the process limit
	ignoreSIGPIPE()
	workspace := flag.String("workspace", "/workspace", "absolute path of the workspace")
	flag.Parse()
	logger := log.New(os.Stderr, "airlock-agent: ", log.Lmicroseconds)
	err := agent.Run(context.Background(), stdio{os.Stdin, os.Stdout}, agent.Config{
		Workspace: *workspace,
		Env:       os.Environ(),
		Build:     build,
		Log:       logger,
	})
	if err != nil && !errors.Is(err, agent.ErrShutdown) {
		logger.Print(err)
		os.Exit(1)
	}
}

// ignoreSIGPIPE keeps the agent alive when the host that reads its stdout
// is gone: a Go program that writes to a broken pipe on fd 1 or 2 dies of
// SIGPIPE unless it handles the signal. With it handled, the write fails
// (EPIPE), the connection ends, and the agent goes on to its channel.
//
// Handled, not ignored: an ignored signal stays ignored in the programs
// the agent starts, while a handled one is reset to its default there.
func ignoreSIGPIPE() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGPIPE)
	go func() {
		for range ch {
		}
	}()
}
