// Command airlock-agent runs inside every sandbox as its first process. It
// speaks the agent protocol on its stdin and stdout (runsc wires those to
// the host) and logs to stderr. Build it static: CGO_ENABLED=0.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log"
	"os"

	"github.com/airlockhq/airlock/agent"
	"github.com/airlockhq/airlock/namespaces/nsinit"
)

// build is set at link time (-ldflags "-X main.build=...").
var build = "dev"

type stdio struct {
	io.Reader
	io.Writer
}

func main() {
	nsinit.RunIfAsked()      // the namespaces backend's init stage: execs the agent, never returns
	agent.RunHelperIfAsked() // starting a program under a memory limit: never returns
	agent.HardenInit()
	workspace := flag.String("workspace", "/workspace", "absolute path of the workspace")
	flag.Parse()
	logger := log.New(os.Stderr, "airlock-agent: ", log.Lmicroseconds)
	err := agent.Serve(context.Background(), stdio{os.Stdin, os.Stdout}, agent.Config{
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
