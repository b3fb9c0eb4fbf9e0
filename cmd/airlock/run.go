package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

const runUsage = `usage: airlock run [flags] FILE|-

Runs FILE, or the code on stdin with "-", once in a fresh sandbox on an
Airlock server. The program's stdout and stderr are printed exactly as the
server returned them; airlock's own notes go to stderr, starting "airlock:",
and only when something special happened (output truncated, timed out,
killed for memory, artifacts left out or saved).

flags:
  -l, --language LANG  python, bash, node or sql; default from FILE's
                       extension (.py python, .sh bash, .js/.mjs node,
                       .sql sql), required for other files and stdin
  --image NAME         image to run in (default: the server's for LANG)
  --timeout SEC        time limit in seconds (default: the server's)
  --out DIR            save every artifact into DIR (created 0755), under
                       its base name; unsafe names are refused
  --agent-id ID        agent to record with the execution (X-Agent-Id)
  --url URL            server (default $AIRLOCK_URL, else the profile's,
                       else http://127.0.0.1:8080)
  --key KEY            API key (default $AIRLOCK_API_KEY, else the
                       profile's, else the file
                       $AIRLOCK_STATE_DIR/default.key when readable)
  --profile NAME       the profile to use (default $AIRLOCK_PROFILE, else
                       the current one; see airlock login)

exit status:
  the program's exit status; a program that timed out or was killed for
  memory but reported 0 exits 124 or 137; a status outside 0-255 exits 255
  2    bad usage (nothing was sent)
  125  airlock itself failed: unreadable FILE, network or API error (a
       refused key too), the server failed the run, or an artifact could
       not be saved (a program exiting 125 looks the same)
`

// languageByExt maps a file extension (lower case) to its language.
var languageByExt = map[string]airlock.Language{
	".py":  airlock.Python,
	".sh":  airlock.Bash,
	".js":  airlock.Node,
	".mjs": airlock.Node,
	".sql": airlock.SQL,
}

// languageForFile returns the language of a file from its extension.
func languageForFile(name string) (airlock.Language, bool) {
	l, ok := languageByExt[strings.ToLower(filepath.Ext(name))]
	return l, ok
}

func runRun(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("run", runUsage, std.err)
	var (
		lang, image, out, agentID string
		timeout                   int
		srv                       serverFlags
	)
	fs.StringVar(&lang, "l", "", "")
	fs.StringVar(&lang, "language", "", "")
	fs.StringVar(&image, "image", "", "")
	fs.IntVar(&timeout, "timeout", 0, "")
	fs.StringVar(&out, "out", "", "")
	fs.StringVar(&agentID, "agent-id", "", "")
	srv.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	switch {
	case len(pos) != 1:
		return usageError(std.err, "run", "want one FILE, or - for stdin")
	case timeout < 0:
		return usageError(std.err, "run", "--timeout must not be negative")
	}
	file := pos[0]

	req := airlock.ExecuteRequest{Language: airlock.Language(lang), Image: image, TimeoutSec: timeout}
	switch {
	case lang != "" && !req.Language.Valid():
		return usageError(std.err, "run", "unknown language %q (one of python, bash, node, sql)", lang)
	case lang != "":
	case file == "-":
		return usageError(std.err, "run", "code on stdin needs -l LANG (python, bash, node or sql)")
	default:
		l, ok := languageForFile(file)
		if !ok {
			return usageError(std.err, "run", "cannot tell the language of %q from its extension: give -l LANG (python, bash, node or sql)", file)
		}
		req.Language = l
	}

	code, err := readCode(file, std.in)
	if err != nil {
		fmt.Fprintf(std.err, "airlock: %v\n", err)
		return exitError{exitAirlockFailed}
	}
	req.Code = code

	c, err := srv.client(nil)
	if err != nil {
		fmt.Fprintf(std.err, "airlock: %s\n", airlock.ErrorMessage(err))
		return exitError{exitAirlockFailed}
	}
	var opts []client.ExecuteOption
	if agentID != "" {
		opts = append(opts, client.WithAgentID(agentID))
	}
	e, err := c.Execute(ctx, req, opts...)
	if err != nil {
		fmt.Fprintf(std.err, "airlock: %s\n", describeError(err, srv.serverURL()))
		return exitError{exitAirlockFailed}
	}

	std.out.Write([]byte(e.Stdout))
	std.err.Write([]byte(e.Stderr))
	for _, f := range e.Findings {
		fmt.Fprintf(std.err, "airlock: guard: %s (%s) at %d:%d: %s\n", printableText(f.Rule), printableText(f.Severity), f.Line, f.Column, printableText(f.Message))
	}
	failed := false
	if e.StdoutTruncated || e.StderrTruncated {
		fmt.Fprintln(std.err, "airlock: output truncated")
	}
	if e.TimedOut {
		secs := timeout
		if secs == 0 {
			secs = int((time.Duration(e.DurationMS)*time.Millisecond + time.Second/2) / time.Second)
		}
		fmt.Fprintf(std.err, "airlock: timed out after %ds\n", secs)
	}
	if e.OOMKilled {
		fmt.Fprintln(std.err, "airlock: killed: out of memory")
	}
	if e.ArtifactsTruncated {
		fmt.Fprintln(std.err, "airlock: some artifacts were left out (over the limits)")
	}
	if e.Status == airlock.StatusFailed {
		msg := e.Error
		if msg == "" {
			msg = "no reason given"
		}
		fmt.Fprintf(std.err, "airlock: the server failed the run: %s\n", printableText(msg))
		failed = true
	}
	if out != "" && len(e.Artifacts) > 0 {
		if err := saveArtifacts(ctx, c, out, e.Artifacts, std.err); err != nil {
			fmt.Fprintf(std.err, "airlock: %v\n", err)
			failed = true
		}
	}
	if failed {
		return exitError{exitAirlockFailed}
	}
	if code := runExitCode(e); code != 0 {
		return exitError{code}
	}
	return nil
}

// readCode reads the code from file, or from stdin for "-", up to the
// service's limit.
func readCode(file string, stdin io.Reader) (string, error) {
	r := stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return "", err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, airlock.MaxCodeBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", file, err)
	}
	if len(b) > airlock.MaxCodeBytes {
		return "", fmt.Errorf("%s is larger than the %d-byte limit on code", file, airlock.MaxCodeBytes)
	}
	return string(b), nil
}

// runExitCode is the status airlock run exits with for an execution.
func runExitCode(e *airlock.Execution) int {
	code := e.ExitCode
	switch {
	case e.TimedOut && (code == 0 || code < 0 || code > 255):
		return 124
	case e.OOMKilled && (code == 0 || code < 0 || code > 255):
		return 137
	case code < 0 || code > 255:
		return 255
	}
	return code
}

// describeError is the one-line message for a failed API call: the
// problem's title and detail, or what went wrong on the way.
func describeError(err error, serverURL string) string {
	var ce *client.Error
	var se setupError
	switch {
	case errors.As(err, &se):
		if airlock.ErrorCode(se.error) != airlock.EINTERNAL {
			return printableText(airlock.ErrorMessage(se.error))
		}
		return printableText(se.Error())
	case errors.As(err, &ce):
		msg := ce.Title
		if ce.Detail != "" && ce.Detail != ce.Title {
			msg += ": " + ce.Detail
		}
		return fmt.Sprintf("%s (HTTP %d)", printableText(msg), ce.Status)
	case errors.Is(err, context.Canceled):
		return "interrupted"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out waiting for the server"
	case errors.Is(err, client.ErrBadResponse):
		return err.Error()
	}
	if serverURL == "" {
		return fmt.Sprintf("network error: %v", err)
	}
	return fmt.Sprintf("cannot reach the server at %s: %v", serverURL, err)
}

// printableText replaces control characters so text from a server cannot
// drive the terminal.
func printableText(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// artifactName returns the file name to save an artifact under: the base
// name of its (slash-separated, workspace-relative) filename. Names that
// could leave the directory or confuse a terminal are refused.
func artifactName(filename string) (string, error) {
	if strings.ContainsRune(filename, 0) || !utf8.ValidString(filename) {
		return "", errors.New("not valid text")
	}
	name := path.Base(filename)
	switch {
	case name == "." || name == "/":
		return "", errors.New("no file name")
	case strings.Contains(name, ".."):
		return "", errors.New(`contains ".."`)
	case strings.ContainsAny(name, `/\`):
		return "", errors.New("contains a path separator")
	case strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) }):
		return "", errors.New("contains control characters")
	case len(name) > 255:
		return "", errors.New("longer than 255 bytes")
	}
	return name, nil
}

// saveArtifacts downloads each artifact into dir under its sanitised base
// name. Every file is written to a new temporary name inside dir, checked
// against the artifact's size and checksum, and renamed into place: a
// symlink planted at the final name is replaced, never followed, and
// nothing outside dir is written. It reports each file on w and returns an
// error if any artifact was not saved.
func saveArtifacts(ctx context.Context, c *client.Client, dir string, arts []airlock.Artifact, w io.Writer) error {
	if err := mkdirForInvoker(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	seen := map[string]bool{}
	var failed int
	for _, a := range arts {
		name, err := artifactName(a.Filename)
		if err == nil && seen[name] {
			err = fmt.Errorf("another artifact was already saved as %s", name)
		}
		if err != nil {
			fmt.Fprintf(w, "airlock: refused artifact %q: %v\n", a.Filename, err)
			failed++
			continue
		}
		seen[name] = true
		n, err := saveArtifact(ctx, c, root, name, a)
		if err != nil {
			fmt.Fprintf(w, "airlock: artifact %q not saved: %s\n", a.Filename, describeError(err, ""))
			failed++
			continue
		}
		fmt.Fprintf(w, "airlock: saved %s (%d bytes)\n", filepath.Join(dir, name), n)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d artifacts not saved", failed, len(arts))
	}
	return nil
}

func saveArtifact(ctx context.Context, c *client.Client, root *os.Root, name string, a airlock.Artifact) (n int64, err error) {
	tmp := ".airlock-" + newID() + ".tmp"
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			f.Close()
			root.Remove(tmp)
		}
	}()
	if n, err = c.DownloadArtifact(ctx, a, f); err != nil {
		return n, err
	}
	if err = f.Chmod(0o644); err != nil {
		return n, err
	}
	if uid, gid, ok := invoker(); ok {
		if err = f.Chown(uid, gid); err != nil {
			return n, err
		}
	}
	if err = f.Close(); err != nil {
		return n, err
	}
	return n, root.Rename(tmp, name)
}
