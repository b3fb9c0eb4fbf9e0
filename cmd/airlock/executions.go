package main

import (
	"context"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
)

const executionsUsage = `usage:
  airlock executions ls [--limit N] [--before CURSOR] [--all] [-o json|table]
  airlock executions show EXECUTION [-o json|table]

Lists the tenant's executions (one-shot runs and session commands),
newest first, and shows one with its output, limits and artifacts.

  ls    one page of --limit executions (default 20, at most 500); when
        there are more, the command to get the next page is printed on
        stderr (--before is the API's cursor, the last ID of a page).
        --all follows the cursor to the end.
  show  the execution's record; -o json prints it as the API answers it
        (with signed artifact URLs).

flags:
  -o, --output FORMAT  table (default) or json
  --url URL            server (default $AIRLOCK_URL, else the profile's,
                       else http://127.0.0.1:8080)
  --key KEY            API key (default $AIRLOCK_API_KEY, else the
                       profile's)
  --profile NAME       the profile to use (default $AIRLOCK_PROFILE, else
                       the current one; see airlock login)
`

func runExecutions(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		return errUsage("executions", "want a subcommand: ls or show")
	}
	switch args[0] {
	case "ls", "list":
		return runExecutionsList(ctx, args[1:], std)
	case "show", "get":
		return runExecutionShow(ctx, args[1:], std)
	}
	return errUsage("executions", "unknown subcommand %q (want ls or show)", args[0])
}

func runExecutionsList(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("executions ls", executionsUsage, std.err)
	var (
		srv   serverFlags
		out   outputFlags
		pages pageFlags
	)
	srv.register(fs)
	out.register(fs, false)
	pages.register(fs, 20)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 0 {
		return errUsage("executions ls", "unexpected argument %q", pos[0])
	}
	if err := pages.check("executions ls"); err != nil {
		return err
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	page := &airlock.ExecutionPage{}
	page.NextCursor, err = pages.follow(ctx, func(ctx context.Context, limit int, before string) (string, error) {
		p, err := c.ListExecutions(ctx, limit, before)
		if err != nil {
			return "", err
		}
		page.Executions = append(page.Executions, p.Executions...)
		return p.NextCursor, nil
	})
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	if out.json(std) {
		return writeJSON(std.out, page)
	}
	t := newTable(std.out, "ID", "CREATED", "LANGUAGE", "STATUS", "EXIT", "DURATION", "SESSION", "IMAGE")
	for _, e := range page.Executions {
		t.row(e.ID, e.CreatedAt.Local().Format(time.DateTime), e.Language, executionState(e), e.ExitCode,
			(time.Duration(e.DurationMS) * time.Millisecond).String(), e.SessionID, e.Image)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(std.err, "airlock: more: airlock executions ls --limit %d --before %s\n", pages.limit, page.NextCursor)
	}
	return nil
}

// executionState is the status, with why it ended when that is news.
func executionState(e *airlock.Execution) string {
	s := string(e.Status)
	switch {
	case e.TimedOut:
		s += " (timed out)"
	case e.OOMKilled:
		s += " (out of memory)"
	}
	return s
}

func runExecutionShow(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("executions show", executionsUsage, std.err)
	var srv serverFlags
	var out outputFlags
	srv.register(fs)
	out.register(fs, false)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 1 {
		return errUsage("executions show", "want one EXECUTION ID")
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	e, err := c.Execution(ctx, pos[0])
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	if out.json(std) {
		return writeJSON(std.out, e)
	}
	return writeRecord(std.out, e)
}
