package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlockhq/airlock"
)

const replUsage = `usage: airlock repl [flags] SESSION

A code context of a session at the terminal: each cell runs in one
persistent interpreter, so variables, imports and open files carry over.
A cell is one line, or a block: a line ending in ':' or '\', or with an
unclosed bracket or string, goes on until a blank line. Output streams as
it is printed; the value of a final expression is printed after it, an
exception's traceback goes to stderr, figures (PNG) are saved to files.
Ctrl-D ends the repl and the context.

flags:
  -l, --language LANG  python (default) or node
  --context ID         use an existing context (and keep it at the end)
  --out DIR            where figures are saved (default .)
  --timeout SEC        time limit of each cell (default: the server's, 60)
  --url URL, --key KEY server and API key (see airlock session -h)
`

func runRepl(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("repl", replUsage, std.err)
	var (
		lang, cid, out string
		timeout        int
		srv            serverFlags
	)
	fs.StringVar(&lang, "l", "python", "")
	fs.StringVar(&lang, "language", "python", "")
	fs.StringVar(&cid, "context", "", "")
	fs.StringVar(&out, "out", ".", "")
	fs.IntVar(&timeout, "timeout", 0, "")
	srv.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 1 {
		return usageError(std.err, "repl", "want one SESSION")
	}
	if !airlock.ContextLanguage(lang).Valid() {
		return usageError(std.err, "repl", "unknown language %q (python or node)", lang)
	}
	id := pos[0]
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	keep := cid != ""
	if cid == "" {
		cc, err := c.CreateContext(ctx, id, airlock.ContextLanguage(lang))
		if err != nil {
			return apiFailed(std, err, &srv)
		}
		cid = cc.ID
	}
	defer func() {
		if !keep {
			c.DeleteContext(context.WithoutCancel(ctx), id, cid)
		}
	}()
	interactive := isTerminal(std.in)
	if interactive {
		fmt.Fprintf(std.err, "airlock: %s context %s in session %s; Ctrl-D to end\n", lang, cid, id)
	}
	in := bufio.NewReader(std.in)
	figures := 0
	for {
		cell, ok := readCell(in, std.err, interactive)
		if !ok {
			return nil
		}
		if strings.TrimSpace(cell) == "" {
			continue
		}
		r, err := c.RunCellStreaming(ctx, id, cid, airlock.RunCellRequest{Code: cell, TimeoutSec: timeout}, std.out, std.err)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintf(std.err, "airlock: %s\n", describeError(err, srv.serverURL()))
			if !interactive {
				return exitError{1}
			}
			continue
		}
		if r.Value != "" {
			fmt.Fprintln(std.out, r.Value)
		}
		for _, o := range r.Outputs {
			switch o.Type {
			case "image/png":
				figures++
				if err := saveFigure(out, figures, o.Data); err != nil {
					fmt.Fprintf(std.err, "airlock: figure not saved: %v\n", err)
				} else {
					fmt.Fprintf(std.err, "[figure saved to %s]\n", filepath.Join(out, fmt.Sprintf("figure-%d.png", figures)))
				}
			case "text/html":
				fmt.Fprintf(std.err, "[text/html output, %d bytes]\n", len(o.Data))
			case "text/plain":
				fmt.Fprintln(std.out, o.Data)
			}
		}
		if r.Error != nil {
			tb := r.Error.Traceback
			if tb == "" {
				tb = r.Error.Name + ": " + r.Error.Value + "\n"
			}
			io.WriteString(std.err, tb)
			if !strings.HasSuffix(tb, "\n") {
				io.WriteString(std.err, "\n")
			}
		}
		if r.TimedOut {
			fmt.Fprintln(std.err, "airlock: the cell timed out and was interrupted")
		}
		if r.ContextState == airlock.ContextDead {
			fmt.Fprintln(std.err, "airlock: the interpreter died; restarting it")
			if _, err := c.RestartContext(ctx, id, cid); err != nil {
				return apiFailed(std, err, &srv)
			}
		}
	}
}

// saveFigure writes a base64 PNG to DIR/figure-N.png.
func saveFigure(dir string, n int, data string) error {
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return err
	}
	if err := mkdirForInvoker(dir, 0o755); err != nil {
		return err
	}
	p := filepath.Join(dir, fmt.Sprintf("figure-%d.png", n))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return err
	}
	return giveToInvoker(p)
}

// readCell reads one cell: a line, or a block that goes on until a blank
// line when a line opens one. ok is false at the end of the input.
func readCell(in *bufio.Reader, prompt io.Writer, interactive bool) (string, bool) {
	var lines []string
	block := false
	for {
		if interactive {
			if len(lines) == 0 {
				io.WriteString(prompt, ">>> ")
			} else {
				io.WriteString(prompt, "... ")
			}
		}
		line, err := in.ReadString('\n')
		if err != nil && line == "" {
			if interactive {
				io.WriteString(prompt, "\n")
			}
			return strings.Join(lines, "\n"), len(lines) > 0
		}
		line = strings.TrimRight(line, "\r\n")
		if block && strings.TrimSpace(line) == "" {
			return strings.Join(lines, "\n"), true
		}
		lines = append(lines, line)
		if !block && !opensBlock(strings.Join(lines, "\n")) {
			return lines[0], true
		}
		block = true
	}
}

// opensBlock reports whether code does not stand alone yet: it ends in
// ':' or '\', or leaves a bracket, a string or a triple-quoted string open.
func opensBlock(code string) bool {
	t := strings.TrimRight(code, " \t")
	if strings.HasSuffix(t, ":") || strings.HasSuffix(t, "\\") || strings.HasSuffix(t, "{") {
		return true
	}
	depth := 0
	var quote string
	for i := 0; i < len(code); i++ {
		c := code[i]
		if quote != "" {
			switch {
			case c == '\\':
				i++
			case strings.HasPrefix(code[i:], quote):
				i += len(quote) - 1
				quote = ""
			case c == '\n' && len(quote) == 1:
				quote = "" // an unterminated short string ends at the line
			}
			continue
		}
		switch c {
		case '#':
			for i < len(code) && code[i] != '\n' {
				i++
			}
		case '"', '\'', '`':
			q := string(c)
			if strings.HasPrefix(code[i:], strings.Repeat(q, 3)) {
				q = strings.Repeat(q, 3)
			}
			if c == '`' {
				q = "`" // template literals span lines
			}
			quote = q
			i += len(q) - 1
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		}
	}
	return depth > 0 || len(quote) == 3 || quote == "`"
}

// isTerminal reports whether r is a character device (a terminal).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
