package dockerfile

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// Limits bound what Parse accepts.
type Limits struct {
	// MaxBytes bounds the Dockerfile's size (default 256 KiB).
	MaxBytes int
	// MaxInstructions bounds its instructions, FROM included (default 200).
	MaxInstructions int
	// MaxLayers bounds the steps that make a layer: RUN, COPY, ADD and
	// WORKDIR (default 40). Each layer is one directory of the overlay a
	// later RUN runs on.
	MaxLayers int
}

func (l *Limits) fill() {
	if l.MaxBytes <= 0 {
		l.MaxBytes = 256 << 10
	}
	if l.MaxInstructions <= 0 {
		l.MaxInstructions = 200
	}
	if l.MaxLayers <= 0 {
		l.MaxLayers = 40
	}
}

// Instruction is one parsed instruction after FROM.
type Instruction struct {
	Line int    // 1-based line where it starts
	Name string // upper case: RUN, COPY, ADD, ENV, ARG, WORKDIR, USER
	Text string // as written (continuation lines joined)
	cmd  instructions.Command
}

// Dockerfile is a parsed Dockerfile of the supported subset: one FROM
// and the instructions after it. Variables are expanded later, by
// Expand, once the base image's environment is known.
type Dockerfile struct {
	From     string // the FROM reference, meta ARGs not yet expanded
	FromLine int
	metaArgs []instructions.ArgCommand
	Steps    []Instruction
}

// supported are the instructions this builder runs.
var supported = map[string]bool{
	"from": true, "run": true, "copy": true, "add": true, "env": true,
	"arg": true, "workdir": true, "user": true,
}

// allowedFlags are the flags each instruction may carry.
var allowedFlags = map[string][]string{
	"copy": {"chown", "chmod", "link"},
	"add":  {"chown", "chmod", "link"},
}

// Parse parses src, refusing what this builder does not implement:
// every instruction outside FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR and
// USER, a second FROM (multi-stage builds), RUN flags and heredocs,
// COPY --from, and ADD of URLs. Errors are *LineError.
func Parse(src []byte, lim Limits) (*Dockerfile, error) {
	lim.fill()
	if len(src) > lim.MaxBytes {
		return nil, &LineError{Msg: fmt.Sprintf("the Dockerfile is %d bytes; at most %d are accepted", len(src), lim.MaxBytes), Err: ErrTooLarge}
	}
	res, err := parser.Parse(bytes.NewReader(src))
	if err != nil {
		return nil, &LineError{Line: lineOf(err), Msg: cleanMsg(err), Err: ErrInvalid}
	}
	nodes := res.AST.Children
	if len(nodes) == 0 {
		return nil, &LineError{Msg: "the Dockerfile has no instructions", Err: ErrInvalid}
	}
	if len(nodes) > lim.MaxInstructions {
		return nil, &LineError{Line: nodes[lim.MaxInstructions].StartLine,
			Msg: fmt.Sprintf("the Dockerfile has %d instructions; at most %d are accepted", len(nodes), lim.MaxInstructions), Err: ErrTooLarge}
	}
	d := &Dockerfile{}
	layers := 0
	for _, n := range nodes {
		name := strings.ToUpper(n.Value)
		lerr := func(sentinel error, format string, a ...any) error {
			return &LineError{Line: n.StartLine, Instruction: name, Msg: fmt.Sprintf(format, a...), Err: sentinel}
		}
		if !supported[strings.ToLower(n.Value)] {
			return nil, lerr(ErrUnsupported, "%s is not supported (supported: FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR, USER)", name)
		}
		if err := checkFlags(n); err != nil {
			return nil, lerr(ErrUnsupported, "%v", err)
		}
		if len(n.Heredocs) > 0 {
			return nil, lerr(ErrUnsupported, "heredocs are not supported")
		}
		v, err := instructions.ParseInstruction(n)
		if err != nil {
			return nil, lerr(ErrInvalid, "%s", cleanMsg(err))
		}
		if st, ok := v.(*instructions.Stage); ok {
			if d.From != "" {
				return nil, lerr(ErrUnsupported, "a second FROM: multi-stage builds are not supported")
			}
			if st.Platform != "" {
				return nil, lerr(ErrUnsupported, "FROM --platform is not supported")
			}
			d.From, d.FromLine = st.BaseName, n.StartLine
			continue
		}
		if d.From == "" {
			a, ok := v.(*instructions.ArgCommand)
			if !ok {
				return nil, lerr(ErrInvalid, "the first instruction must be FROM (or ARG before it)")
			}
			d.metaArgs = append(d.metaArgs, *a)
			continue
		}
		cmd := v.(instructions.Command)
		switch c := cmd.(type) {
		case *instructions.RunCommand:
			if len(c.Files) > 0 {
				return nil, lerr(ErrUnsupported, "heredocs are not supported")
			}
			if len(c.CmdLine) == 0 || (len(c.CmdLine) == 1 && strings.TrimSpace(c.CmdLine[0]) == "") {
				return nil, lerr(ErrInvalid, "RUN needs a command")
			}
			layers++
		case *instructions.CopyCommand:
			if c.From != "" {
				return nil, lerr(ErrUnsupported, "COPY --from is not supported (single-stage builds only)")
			}
			if len(c.SourceContents) > 0 {
				return nil, lerr(ErrUnsupported, "heredocs are not supported")
			}
			layers++
		case *instructions.AddCommand:
			if len(c.SourceContents) > 0 {
				return nil, lerr(ErrUnsupported, "heredocs are not supported")
			}
			for _, s := range c.SourcePaths {
				if isURL(s) {
					return nil, lerr(ErrUnsupported, "ADD of a URL (%s) is not supported: the build has no network; put the file in the build context", s)
				}
				if isArchive(s) {
					return nil, lerr(ErrUnsupported, "ADD of a local archive (%s) is not supported: COPY it and unpack it with RUN tar", s)
				}
			}
			layers++
		case *instructions.WorkdirCommand:
			layers++
		case *instructions.EnvCommand, *instructions.ArgCommand, *instructions.UserCommand:
		default:
			return nil, lerr(ErrUnsupported, "%s is not supported", name)
		}
		if layers > lim.MaxLayers {
			return nil, lerr(ErrTooLarge, "more than %d RUN, COPY, ADD and WORKDIR steps", lim.MaxLayers)
		}
		d.Steps = append(d.Steps, Instruction{Line: n.StartLine, Name: name, Text: strings.TrimSpace(n.Original), cmd: cmd})
	}
	if d.From == "" {
		return nil, &LineError{Msg: "the Dockerfile has no FROM", Err: ErrInvalid}
	}
	return d, nil
}

// checkFlags refuses flags an instruction may not carry (RUN --mount,
// --network and --security among them).
func checkFlags(n *parser.Node) error {
	for _, f := range n.Flags {
		name, _, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		ok := false
		for _, a := range allowedFlags[strings.ToLower(n.Value)] {
			ok = ok || a == name
		}
		if strings.EqualFold(n.Value, "from") && name == "platform" {
			ok = true // refused with its own message
		}
		if !ok {
			return fmt.Errorf("flag --%s is not supported", name)
		}
	}
	return nil
}

func isURL(s string) bool {
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") ||
		strings.HasPrefix(l, "git@") || strings.HasPrefix(l, "git://") || strings.Contains(l, "://")
}

func isArchive(s string) bool {
	l := strings.ToLower(path.Base(s))
	for _, ext := range []string{".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst"} {
		if strings.HasSuffix(l, ext) {
			return true
		}
	}
	return false
}

// lineOf finds the line a buildkit error carries, or 0.
func lineOf(err error) int {
	var le *parser.LocationError
	if errors.As(err, &le) && len(le.Locations) > 0 && len(le.Locations[0]) > 0 {
		return le.Locations[0][0].Start.Line
	}
	return 0
}

// cleanMsg is a buildkit error's message without its stack or location
// prefix.
func cleanMsg(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "\n"); i >= 0 {
		msg = msg[:i]
	}
	return msg
}
