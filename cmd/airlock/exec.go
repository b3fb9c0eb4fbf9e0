package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

const execUsage = `usage: airlock exec [flags] SESSION -- CMD [ARG...]
       airlock exec [flags] --shell SESSION 'COMMAND LINE'

Runs a command in a session and streams its stdout and stderr as they
come; exits with the command's exit status. Ctrl-C sends SIGINT to the
command (a second one sends SIGKILL).

flags:
  --shell, -s        run the argument as a bash command line
  --env KEY=VALUE    add to the environment (repeatable)
  --cwd DIR          working directory (relative to /workspace)
  --timeout SEC      time limit in seconds (default: the server's, 60)
  -i, --stdin        send this process's stdin to the command (at most
                     1 MiB, read before the command starts)
  --url URL, --key KEY  server and API key (see airlock session -h)

exit status:
  the command's; 124 or 137 if it timed out or was killed and reported 0;
  2 on bad usage; 125 if airlock itself failed (network, API error, the
  session ended)
`

// envFlag collects --env KEY=VALUE.
type envFlag map[string]string

func (e envFlag) String() string { return "" }

func (e envFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE")
	}
	e[k] = val
	return nil
}

func runExec(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("exec", execUsage, std.err)
	var (
		shell, useStdin bool
		cwd             string
		timeout         int
		srv             serverFlags
	)
	env := envFlag{}
	fs.BoolVar(&shell, "shell", false, "")
	fs.BoolVar(&shell, "s", false, "")
	fs.Var(env, "env", "")
	fs.StringVar(&cwd, "cwd", "", "")
	fs.IntVar(&timeout, "timeout", 0, "")
	fs.BoolVar(&useStdin, "i", false, "")
	fs.BoolVar(&useStdin, "stdin", false, "")
	srv.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) < 2 {
		return usageError(std.err, "exec", "want SESSION and a command")
	}
	id := pos[0]
	req := airlock.SessionExecRequest{Cwd: cwd, TimeoutSec: timeout}
	if len(env) > 0 {
		req.Env = env
	}
	if shell {
		req.Shell = strings.Join(pos[1:], " ")
	} else {
		req.Cmd = pos[1:]
	}
	if useStdin {
		b, err := io.ReadAll(io.LimitReader(std.in, airlock.MaxStdinBytes+1))
		if err != nil {
			fmt.Fprintf(std.err, "airlock: reading stdin: %v\n", err)
			return exitError{exitAirlockFailed}
		}
		if len(b) > airlock.MaxStdinBytes {
			fmt.Fprintf(std.err, "airlock: stdin is larger than %d bytes; upload it with airlock cp instead\n", airlock.MaxStdinBytes)
			return exitError{exitAirlockFailed}
		}
		req.Stdin = string(b)
	}
	c, err := srv.client(nil)
	if err != nil {
		fmt.Fprintf(std.err, "airlock: %s\n", airlock.ErrorMessage(err))
		return exitError{exitAirlockFailed}
	}

	// Ctrl-C goes to the command, not to this process; the stream ends
	// when the command does.
	var mu sync.Mutex
	pid := 0
	interrupts := make(chan os.Signal, 2)
	signal.Notify(interrupts, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(interrupts)
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		n := 0
		for range interrupts {
			n++
			mu.Lock()
			p := pid
			mu.Unlock()
			if p == 0 {
				cancel()
				return
			}
			sig := "INT"
			if n > 1 {
				sig = "KILL"
			}
			if err := c.SignalExec(context.Background(), id, p, sig); err != nil {
				fmt.Fprintf(std.err, "airlock: signal: %s\n", describeError(err, srv.serverURL()))
			}
		}
	}()
	e, err := c.ExecStreaming(streamCtx, id, req, client.ExecStream{
		Started: func(_ string, p int) {
			mu.Lock()
			pid = p
			mu.Unlock()
		},
		Stdout: std.out,
		Stderr: std.err,
	})
	if err != nil {
		fmt.Fprintf(std.err, "airlock: %s\n", describeError(err, srv.serverURL()))
		return exitError{exitAirlockFailed}
	}
	if e.StdoutTruncated || e.StderrTruncated {
		fmt.Fprintln(std.err, "airlock: output past the limit was cut from the recorded result (all of it was streamed)")
	}
	if e.TimedOut {
		fmt.Fprintln(std.err, "airlock: timed out")
	}
	if code := runExitCode(e); code != 0 {
		return exitError{code}
	}
	return nil
}
