package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

const shellUsage = `usage: airlock shell [flags] SESSION [-- CMD [ARG...]]

Opens an interactive terminal in a session: the login shell (bash -l, or
sh), or CMD. This terminal is put in raw mode (restored on exit), and
resizing it resizes the session's terminal. airlock shell exits with the
program's exit status when it exits. If the connection is lost, the
terminal runs on in the session: attach to it again with --attach.

flags:
  --env KEY=VALUE    add to the program's environment (repeatable)
  --attach PTY_ID    attach to a terminal that exists instead of starting one
  --url URL, --key KEY  server and API key (see airlock session -h)

exit status:
  the program's; 2 on bad usage; 125 if airlock itself failed (network,
  API error, the session ended) or the connection was lost
`

func runShell(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("shell", shellUsage, std.err)
	var (
		attach string
		srv    serverFlags
	)
	env := envFlag{}
	fs.Var(env, "env", "")
	fs.StringVar(&attach, "attach", "", "")
	srv.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) < 1 {
		return usageError(std.err, "shell", "want SESSION")
	}
	if attach != "" && (len(pos) > 1 || len(env) > 0) {
		return usageError(std.err, "shell", "--attach takes no command and no --env")
	}
	id := pos[0]
	c, err := srv.client(nil)
	if err != nil {
		fmt.Fprintf(std.err, "airlock: %s\n", airlock.ErrorMessage(err))
		return exitError{exitAirlockFailed}
	}
	failed := func(err error) error {
		fmt.Fprintf(std.err, "airlock: %s\n", describeError(err, srv.serverURL()))
		return exitError{exitAirlockFailed}
	}

	in, _ := std.in.(*os.File)
	out, _ := std.out.(*os.File)
	cols, rows := 80, 24
	if out != nil && term.IsTerminal(int(out.Fd())) {
		if w, h, err := term.GetSize(int(out.Fd())); err == nil && w > 0 && h > 0 {
			cols, rows = min(w, airlock.MaxPTYCells), min(h, airlock.MaxPTYCells)
		}
	}
	ptyID := attach
	if ptyID == "" {
		req := airlock.CreatePTYRequest{Cols: cols, Rows: rows, Cmd: pos[1:]}
		if t := os.Getenv("TERM"); t != "" {
			env["TERM"] = t
		}
		if len(env) > 0 {
			req.Env = env
		}
		info, err := c.CreatePTY(ctx, id, req)
		if err != nil {
			return failed(err)
		}
		ptyID = info.PTYID
	}
	conn, err := c.AttachPTY(ctx, id, ptyID)
	if err != nil {
		return failed(err)
	}
	defer conn.Close()
	if attach != "" {
		conn.Resize(cols, rows)
	}

	if in != nil && term.IsTerminal(int(in.Fd())) {
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return failed(fmt.Errorf("raw mode: %w", err))
		}
		defer term.Restore(int(in.Fd()), old)
	}
	if out != nil && term.IsTerminal(int(out.Fd())) {
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if w, h, err := term.GetSize(int(out.Fd())); err == nil && w > 0 && h > 0 {
					conn.Resize(min(w, airlock.MaxPTYCells), min(h, airlock.MaxPTYCells))
				}
			}
		}()
	}
	// Input: what is typed goes to the terminal as it comes. The reader
	// is left behind when the program exits (a blocked read of a
	// terminal cannot be cancelled).
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := std.in.Read(buf)
			if n > 0 {
				if _, werr := conn.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	_, err = io.Copy(std.out, conn)
	if err == nil { // io.Copy turns the program's exit (EOF) into nil
		code, _ := conn.ExitCode()
		if code != 0 {
			return exitError{code}
		}
		return nil
	}
	if errors.Is(err, client.ErrPTYDetached) {
		err = fmt.Errorf("%w; the terminal runs on: airlock shell --attach %s %s", err, ptyID, id)
	} else {
		err = fmt.Errorf("%w (terminal %s)", err, ptyID)
	}
	fmt.Fprint(std.err, "\r\n")
	return failed(err)
}
