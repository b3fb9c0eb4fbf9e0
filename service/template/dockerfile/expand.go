package dockerfile

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// Step is one instruction with its variables expanded and the state
// (environment, user, working directory) it runs in.
type Step struct {
	Index int    // 1-based among the instructions after FROM
	Line  int    // 1-based line in the Dockerfile
	Name  string // RUN, COPY, ADD, ENV, ARG, WORKDIR, USER
	Text  string // as written

	Argv    []string // RUN: the program and its arguments
	Sources []string // COPY, ADD: paths in the build context
	Dest    string   // COPY, ADD: absolute path in the rootfs
	Chown   string   // COPY, ADD: --chown, expanded
	Chmod   string   // COPY, ADD: --chmod, expanded

	// Env is the environment of a RUN (ENV values and the ARGs in
	// scope); for other steps, the environment after the step.
	Env     []string
	User    string // "" means root
	Workdir string // absolute
}

// Layered reports whether the step changes the filesystem (makes a
// layer): RUN, COPY, ADD and WORKDIR.
func (s Step) Layered() bool {
	switch s.Name {
	case "RUN", "COPY", "ADD", "WORKDIR":
		return true
	}
	return false
}

// Final is the image configuration after the last instruction.
type Final struct {
	Env     []string // KEY=VALUE: the base image's and ENV's, never ARGs
	User    string   // "" means root
	Workdir string
}

// kv is an ordered list of KEY=VALUE.
type kv []string

func (l kv) get(k string) (string, bool) {
	for _, e := range l {
		if key, v, _ := strings.Cut(e, "="); key == k {
			return v, true
		}
	}
	return "", false
}

func (l kv) set(k, v string) kv {
	for i, e := range l {
		if key, _, _ := strings.Cut(e, "="); key == k {
			out := slices.Clone(l)
			out[i] = k + "=" + v
			return out
		}
	}
	return append(slices.Clone(l), k+"="+v)
}

// merged is env with the args not shadowed by it appended.
func merged(env, args kv) kv {
	out := slices.Clone(env)
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		if _, ok := env.get(k); !ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// FromRef is the FROM reference with the meta ARGs (those before FROM)
// expanded, build arguments overriding their defaults.
func (d *Dockerfile) FromRef(buildArgs map[string]string) (string, error) {
	meta := d.meta(buildArgs)
	ref, _, err := shell.NewLex('\\').ProcessWord(d.From, shell.EnvsFromSlice(meta))
	if err != nil || ref == "" || strings.ContainsAny(ref, " \t$") {
		return "", &LineError{Line: d.FromLine, Instruction: "FROM", Msg: fmt.Sprintf("cannot resolve %q", d.From), Err: ErrInvalid}
	}
	return ref, nil
}

func (d *Dockerfile) meta(buildArgs map[string]string) kv {
	var meta kv
	for _, a := range d.metaArgs {
		for _, p := range a.Args {
			v, given := buildArgs[p.Key]
			if !given && p.Value != nil {
				v, given = *p.Value, true
			}
			if given {
				meta = meta.set(p.Key, v)
			}
		}
	}
	return meta
}

// Expand walks the instructions from the base image's environment and
// returns each step with its variables expanded, and the final image
// configuration. Build arguments set ARG values (over their defaults);
// a build argument no ARG declares is ignored, as Docker does.
func (d *Dockerfile) Expand(baseEnv []string, buildArgs map[string]string) ([]Step, Final, error) {
	meta := d.meta(buildArgs)
	env := kv(slices.Clone(baseEnv))
	var args kv
	user, workdir := "", "/"
	lex := shell.NewLex('\\')
	var steps []Step
	for i, in := range d.Steps {
		scope := merged(env, args)
		expand := func(w string) (string, error) {
			s, _, err := lex.ProcessWord(w, shell.EnvsFromSlice(scope))
			return s, err
		}
		st := Step{Index: i + 1, Line: in.Line, Name: in.Name, Text: in.Text}
		fail := func(format string, a ...any) error {
			return &LineError{Line: in.Line, Instruction: in.Name, Msg: fmt.Sprintf(format, a...), Err: ErrInvalid}
		}
		// Expand a copy: the parsed command stays as parsed.
		switch c := in.cmd.(type) {
		case *instructions.RunCommand:
			if c.PrependShell {
				st.Argv = []string{"/bin/sh", "-c", strings.Join(c.CmdLine, " ")}
			} else {
				st.Argv = slices.Clone(c.CmdLine)
			}
			st.Env = scope
		case *instructions.CopyCommand:
			cc := *c
			cc.SourcePaths = slices.Clone(c.SourcePaths)
			if err := cc.Expand(expand); err != nil {
				return nil, Final{}, fail("%s", cleanMsg(err))
			}
			st.Sources, st.Dest, st.Chown, st.Chmod = cc.SourcePaths, cc.DestPath, cc.Chown, cc.Chmod
		case *instructions.AddCommand:
			ac := *c
			ac.SourcePaths = slices.Clone(c.SourcePaths)
			if err := ac.Expand(expand); err != nil {
				return nil, Final{}, fail("%s", cleanMsg(err))
			}
			st.Sources, st.Dest, st.Chown, st.Chmod = ac.SourcePaths, ac.DestPath, ac.Chown, ac.Chmod
			for _, s := range st.Sources {
				if isURL(s) || isArchive(s) {
					return nil, Final{}, &LineError{Line: in.Line, Instruction: in.Name, Msg: fmt.Sprintf("ADD of %s is not supported", s), Err: ErrUnsupported}
				}
			}
		case *instructions.EnvCommand:
			for _, p := range c.Env {
				k, err := expand(p.Key)
				if err != nil {
					return nil, Final{}, fail("%s", cleanMsg(err))
				}
				v, err := expand(p.Value)
				if err != nil {
					return nil, Final{}, fail("%s", cleanMsg(err))
				}
				if k == "" || strings.ContainsAny(k, "=\x00") || strings.Contains(v, "\x00") {
					return nil, Final{}, fail("invalid variable %q", k)
				}
				env = env.set(k, v)
				// Later pairs of one ENV see the earlier ones.
				scope = merged(env, args)
			}
		case *instructions.ArgCommand:
			for _, p := range c.Args {
				v, given := buildArgs[p.Key]
				if !given {
					v, given = meta.get(p.Key)
				}
				if !given && p.Value != nil {
					ev, err := expand(*p.Value)
					if err != nil {
						return nil, Final{}, fail("%s", cleanMsg(err))
					}
					v, given = ev, true
				}
				args = args.set(p.Key, v)
				scope = merged(env, args)
			}
		case *instructions.WorkdirCommand:
			p, err := expand(c.Path)
			if err != nil {
				return nil, Final{}, fail("%s", cleanMsg(err))
			}
			if !path.IsAbs(p) {
				p = path.Join(workdir, p)
			}
			workdir = path.Clean(p)
			st.Dest = workdir
		case *instructions.UserCommand:
			u, err := expand(c.User)
			if err != nil {
				return nil, Final{}, fail("%s", cleanMsg(err))
			}
			if u == "" || strings.ContainsAny(u, " \t\n/") {
				return nil, Final{}, fail("invalid user %q", u)
			}
			user = u
		}
		if st.Name == "COPY" || st.Name == "ADD" {
			if len(st.Sources) == 0 || st.Dest == "" {
				return nil, Final{}, fail("needs a source and a destination")
			}
			dest := st.Dest
			if !path.IsAbs(dest) {
				dest = path.Join(workdir, dest)
			}
			dest = path.Clean(dest)
			if (strings.HasSuffix(st.Dest, "/") || st.Dest == "." || len(st.Sources) > 1) && dest != "/" {
				dest += "/"
			}
			st.Dest = dest
		}
		st.User, st.Workdir = user, workdir
		if st.Name != "RUN" {
			st.Env = slices.Clone(env)
		}
		steps = append(steps, st)
	}
	return steps, Final{Env: slices.Clone(env), User: user, Workdir: workdir}, nil
}
