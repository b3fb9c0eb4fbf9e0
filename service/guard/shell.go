package guard

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// shell checks shell code (bash): the syntax tree of mvdan.cc/sh, its
// words resolved where they are literal; code given to bash -c, sh -c,
// eval, python -c and node -e as a literal string is checked again (to
// depth maxDepth) and reported where that string is.
func (a *analysis) shell(src string, at pos, depth int) {
	if depth > a.maxDepth || a.stopped() {
		return
	}
	if nesting(src) > maxNesting || shellNesting(src) > maxNesting {
		line, col := at.at(1, 1)
		a.c.add(RuleLimit, line, col, "shell: nested deeper than the guard parses")
		return
	}
	p := syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.RecoverErrors(8))
	f, err := p.Parse(strings.NewReader(src), "")
	if err != nil {
		line, col := at.at(1, 1)
		if pe, ok := err.(syntax.ParseError); ok {
			line, col = at.at(int(pe.Pos.Line()), int(pe.Pos.Col()))
		}
		a.c.add(RuleParseError, line, col, "shell: "+firstLine(err.Error()))
		if f == nil {
			return
		}
	}
	s := &shellWalk{a: a, at: at, depth: depth}
	s.file(f)
}

// shellNesting bounds how deep the shell's compound commands nest (if,
// while, until, for, case, select against fi, done, esac), for the
// parser's recursion; words in strings count too (an upper bound).
func shellNesting(src string) int {
	depth, deepest := 0, 0
	for _, w := range strings.FieldsFunc(src, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == ';' || r == '&' || r == '|' || r == '(' || r == ')'
	}) {
		switch w {
		case "if", "while", "until", "for", "case", "select":
			depth++
			deepest = max(deepest, depth)
		case "fi", "done", "esac":
			depth = max(0, depth-1)
		}
	}
	return deepest
}

// shellArgv checks a command given as an argv (a session exec's cmd, a
// list given to subprocess or spawn), reported at at.
//
// No shell reads an argv: it is not printed and parsed again but made
// into the syntax tree of one simple command whose words are its
// arguments, each taken literally (as if single-quoted), and walked as
// parsed shell is.
func (a *analysis) shellArgv(argv []string, at pos, depth int) {
	if depth > a.maxDepth || a.stopped() {
		return
	}
	call := &syntax.CallExpr{Args: make([]*syntax.Word, len(argv))}
	for i, arg := range argv {
		call.Args[i] = &syntax.Word{Parts: []syntax.WordPart{&syntax.SglQuoted{Value: arg}}}
	}
	s := &shellWalk{a: a, at: at, depth: depth}
	s.file(&syntax.File{Stmts: []*syntax.Stmt{{Cmd: call}}})
}

type shellWalk struct {
	a     *analysis
	at    pos
	depth int
}

func (s *shellWalk) add(rule string, p syntax.Pos, msg string) {
	line, col := s.at.at(int(p.Line()), int(p.Col()))
	s.a.c.add(rule, line, col, msg)
}

func (s *shellWalk) file(f *syntax.File) {
	syntax.Walk(f, func(n syntax.Node) bool {
		if s.a.stopped() {
			return false
		}
		switch n := n.(type) {
		case *syntax.FuncDecl:
			s.funcDecl(n)
		case *syntax.BinaryCmd:
			if n.Op == syntax.Pipe || n.Op == syntax.PipeAll {
				s.pipeline(n)
			}
		case *syntax.WhileClause:
			s.loop(n)
		case *syntax.CallExpr:
			s.call(n)
		case *syntax.Redirect:
			s.redirect(n)
		}
		return true
	})
}

// command is a simple command with its wrappers (sudo, env, nohup, ...)
// taken off: its name (the base name, "" when not literal), its
// literal arguments (ok false when one is not) and their words.
type command struct {
	name  string
	args  []string
	lits  []bool
	words []*syntax.Word
	pos   syntax.Pos
}

// wrappers run the command they are given; the flags they take are
// skipped, and for some a number or duration too.
var wrappers = map[string]bool{
	"sudo": true, "doas": true, "env": true, "nohup": true, "nice": true, "setsid": true,
	"exec": true, "command": true, "builtin": true, "time": true, "timeout": true,
	"stdbuf": true, "ionice": true, "chrt": true, "taskset": true, "xargs": true,
	"busybox": true, "unbuffer": true, "script": false,
}

func resolve(c *syntax.CallExpr) command {
	var cmd command
	words := c.Args
	for len(words) > 0 {
		name, ok := wordLit(words[0])
		base := path.Base(name)
		if !ok || !wrappers[base] {
			break
		}
		words = words[1:]
		for len(words) > 0 {
			w, ok := wordLit(words[0])
			if !ok {
				break
			}
			switch {
			case strings.HasPrefix(w, "-") && w != "-":
				words = words[1:]
				continue
			case base == "env" && strings.Contains(w, "="):
				words = words[1:]
				continue
			case (base == "timeout" || base == "nice" || base == "chrt" || base == "taskset" || base == "ionice") && numeric(w):
				words = words[1:]
				continue
			}
			break
		}
	}
	if len(words) == 0 {
		return cmd
	}
	name, ok := wordLit(words[0])
	if ok {
		cmd.name = path.Base(name)
	}
	cmd.pos = words[0].Pos()
	for _, w := range words[1:] {
		lit, ok := wordLit(w)
		cmd.args = append(cmd.args, lit)
		cmd.lits = append(cmd.lits, ok)
		cmd.words = append(cmd.words, w)
	}
	return cmd
}

// numeric reports whether s looks like a number, a duration or a CPU list.
func numeric(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || strings.ContainsRune(".,-xsmhdf", r)) {
			return false
		}
	}
	return s[0] >= '0' && s[0] <= '9'
}

// wordLit resolves a word made only of literal parts (plain, quoted,
// escaped); ok is false if any part is an expansion, and lit holds the
// literal parts then.
func wordLit(w *syntax.Word) (lit string, ok bool) {
	if w == nil {
		return "", false
	}
	var b strings.Builder
	ok = true
	var parts func([]syntax.WordPart)
	parts = func(ps []syntax.WordPart) {
		for _, p := range ps {
			switch p := p.(type) {
			case *syntax.Lit:
				b.WriteString(unescape(p.Value))
			case *syntax.SglQuoted:
				if !p.Dollar {
					b.WriteString(p.Value)
					break
				}
				// $'...': ANSI-C escapes (\n, \t, \x41, ...), as bash
				// decodes them; how argv given without a shell is quoted.
				v, err := expand.Literal(nil, &syntax.Word{Parts: []syntax.WordPart{p}})
				if err != nil {
					ok = false
					break
				}
				b.WriteString(v)
			case *syntax.DblQuoted:
				parts(p.Parts)
			default:
				ok = false
			}
		}
	}
	parts(w.Parts)
	return b.String(), ok
}

// unescape removes the backslashes of an unquoted literal.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Commands and their kinds.
var (
	shells       = set("sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "csh", "tcsh", "fish", "busybox")
	interpreters = set("python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php", "lua", "tclsh")
	fetchers     = set("curl", "wget", "fetch", "aria2c", "lwp-download", "lwp-request", "GET", "http", "https", "xh")
	netcats      = set("nc", "ncat", "netcat", "nc.traditional", "nc.openbsd", "telnet", "socat", "openssl")
	miners       = set("xmrig", "xmrig-notls", "xmrig-cuda", "xmr-stak", "xmr-stak-cpu", "xmr-stak-rx", "minerd",
		"cpuminer", "cpuminer-multi", "cpuminer-opt", "cgminer", "bfgminer", "ethminer", "ccminer", "t-rex",
		"nbminer", "lolminer", "phoenixminer", "nanominer", "srbminer", "srbminer-multi", "teamredminer",
		"gminer", "bminer", "kawpowminer", "xmrigdaemon", "cryptonight", "hellminer", "wildrig", "wildrig-multi")
	escapers = set("mount", "umount", "nsenter", "unshare", "pivot_root", "debugfs", "insmod", "modprobe", "capsh")
	// printers take text, not things to run or reach: what their
	// arguments say is data.
	printers = set("echo", "printf", "print", "grep", "egrep", "fgrep", "rg", "sed", "awk", "cat", "test", "[",
		"[[", ":", "true", "false", "logger", "printenv", "man", "which", "type", "wc", "head", "tail", "read")
	// writers write to the paths they are given.
	writers = set("tee", "mkdir", "cp", "mv", "ln", "dd", "touch", "rmdir", "install", "truncate", "chmod", "chown")
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func isMiner(name string) bool { return miners[strings.ToLower(name)] }

// funcDecl flags a function that runs itself in a pipe or in the
// background: the fork bomb :(){ :|:& };:
func (s *shellWalk) funcDecl(fd *syntax.FuncDecl) {
	if fd.Name == nil || fd.Body == nil {
		return
	}
	name := fd.Name.Value
	bomb := false
	calls := 0
	syntax.Walk(fd.Body, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.BinaryCmd:
			if (n.Op == syntax.Pipe || n.Op == syntax.PipeAll) && callsName(n.X, name) && callsName(n.Y, name) {
				bomb = true
			}
		case *syntax.Stmt:
			if n.Background && callsName(n, name) {
				bomb = true
			}
		case *syntax.CallExpr:
			if c := resolve(n); c.name == name {
				calls++
			}
		}
		return !bomb
	})
	if bomb || calls >= 2 && hasBackground(fd.Body) {
		s.add(RuleForkBomb, fd.Pos(), "function "+name+" runs itself more than once at a time")
	}
}

// callsName reports whether a statement runs the command name.
func callsName(n syntax.Node, name string) bool {
	found := false
	syntax.Walk(n, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok && resolve(c).name == name {
			found = true
		}
		return !found
	})
	return found
}

func hasBackground(n syntax.Node) bool {
	found := false
	syntax.Walk(n, func(n syntax.Node) bool {
		if st, ok := n.(*syntax.Stmt); ok && st.Background {
			found = true
		}
		return !found
	})
	return found
}

// loop flags an endless loop that starts itself in the background
// (while true; do $0 & done, or bash "$0" &).
func (s *shellWalk) loop(w *syntax.WhileClause) {
	if w.Until || len(w.Cond) != 1 {
		return
	}
	if cond, ok := w.Cond[0].Cmd.(*syntax.CallExpr); !ok || !endless(resolve(cond).name) {
		return
	}
	for _, st := range w.Do {
		if !st.Background {
			continue
		}
		if c, ok := st.Cmd.(*syntax.CallExpr); ok && len(c.Args) > 0 && selfRef(c) {
			s.add(RuleForkBomb, w.Pos(), "an endless loop starts the script itself in the background")
		}
	}
}

func endless(name string) bool { return name == "true" || name == ":" }

// selfRef reports whether a command runs the script itself ($0).
func selfRef(c *syntax.CallExpr) bool {
	for i, w := range c.Args {
		if i > 1 {
			break
		}
		for _, p := range w.Parts {
			if pe, ok := p.(*syntax.ParamExp); ok && pe.Param != nil && pe.Param.Value == "0" {
				return true
			}
			if dq, ok := p.(*syntax.DblQuoted); ok && len(dq.Parts) == 1 {
				if pe, ok := dq.Parts[0].(*syntax.ParamExp); ok && pe.Param != nil && pe.Param.Value == "0" {
					return true
				}
			}
		}
	}
	return false
}

// stages flattens a pipeline into its commands.
func stages(b *syntax.BinaryCmd) []*syntax.Stmt {
	var out []*syntax.Stmt
	var add func(st *syntax.Stmt)
	add = func(st *syntax.Stmt) {
		if bc, ok := st.Cmd.(*syntax.BinaryCmd); ok && (bc.Op == syntax.Pipe || bc.Op == syntax.PipeAll) {
			add(bc.X)
			add(bc.Y)
			return
		}
		out = append(out, st)
	}
	add(b.X)
	add(b.Y)
	return out
}

// stageCommand is the first simple command of a pipeline stage.
func stageCommand(st *syntax.Stmt) (command, bool) {
	var found *syntax.CallExpr
	syntax.Walk(st, func(n syntax.Node) bool {
		if found != nil {
			return false
		}
		if c, ok := n.(*syntax.CallExpr); ok {
			found = c
			return false
		}
		return true
	})
	if found == nil {
		return command{}, false
	}
	return resolve(found), true
}

// pipeline flags fetched code piped into a shell or interpreter, and a
// shell piped to or from a network tool.
func (s *shellWalk) pipeline(b *syntax.BinaryCmd) {
	sts := stages(b)
	fetchAt, netAt, shellAt := -1, -1, -1
	for i, st := range sts {
		c, ok := stageCommand(st)
		if !ok {
			continue
		}
		switch {
		case fetchers[c.name] && fetchAt < 0:
			fetchAt = i
		case netcats[c.name] && netAt < 0:
			netAt = i
		case (shells[c.name] || interpreters[c.name]) && readsStdin(c):
			if fetchAt >= 0 && fetchAt < i {
				s.add(RuleDownloadExec, b.Pos(), "output of "+commandName(sts[fetchAt])+" is run by "+c.name)
				return
			}
			if shells[c.name] && shellAt < 0 {
				shellAt = i
			}
		}
	}
	if netAt >= 0 && shellAt >= 0 {
		s.add(RuleReverseShell, b.Pos(), "a shell is piped to a network connection")
	}
}

func commandName(st *syntax.Stmt) string {
	c, _ := stageCommand(st)
	return c.name
}

// readsStdin reports whether a shell or interpreter runs its standard
// input: no script file or -c/-e code among its arguments (bash -s and
// python - read it too).
func readsStdin(c command) bool {
	for i, a := range c.args {
		if !c.lits[i] {
			return false
		}
		switch {
		case a == "-" || a == "-s" || a == "/dev/stdin":
			return true
		case a == "-c" || a == "-e" || a == "-m" || a == "--eval" || a == "-E":
			return false
		case strings.HasPrefix(a, "-"):
			continue
		default:
			return false // a script file
		}
	}
	return true
}

// call checks one simple command.
func (s *shellWalk) call(ce *syntax.CallExpr) {
	c := resolve(ce)
	if c.name == "" {
		return
	}
	switch {
	case isMiner(c.name):
		s.add(RuleMiner, c.pos, "runs the miner "+c.name)
	case escapers[c.name]:
		s.add(RuleEscapeProbe, c.pos, "runs "+c.name+", which probes the sandbox's isolation")
	}
	s.netcat(c)
	s.nested(c)
	s.substituted(c)
	if printers[c.name] {
		return
	}
	for i, arg := range c.args {
		p := c.words[i].Pos()
		s.text(arg, p)
		if writers[c.name] || c.name == "sh" || c.name == "bash" {
			if under(strings.TrimPrefix(arg, "of="), "/sys/fs/cgroup") {
				s.add(RuleEscapeProbe, p, c.name+" writes under /sys/fs/cgroup")
			}
		}
	}
}

// text checks a literal argument of a command that is not a printer.
func (s *shellWalk) text(arg string, p syntax.Pos) {
	switch {
	case strings.Contains(arg, "/dev/tcp/") || strings.Contains(arg, "/dev/udp/"):
		s.add(RuleReverseShell, p, "opens a network connection through /dev/tcp")
	case stratum(arg):
		s.add(RuleMiningPool, p, "connects to a mining pool (stratum)")
	case hostPath(arg) != "":
		s.add(RuleEscapeProbe, p, "reaches "+hostPath(arg))
	}
}

// netcat flags nc -e, ncat --sh-exec and socat EXEC:/SYSTEM: addresses.
func (s *shellWalk) netcat(c command) {
	if !netcats[c.name] {
		return
	}
	for i, a := range c.args {
		p := c.words[i].Pos()
		switch {
		case c.name == "socat":
			l := strings.ToLower(a)
			if strings.HasPrefix(l, "exec:") || strings.HasPrefix(l, "system:") {
				s.add(RuleReverseShell, p, "socat runs a program on a network connection")
			}
		case a == "-e" || a == "-c" || a == "--exec" || a == "--sh-exec" || a == "--lua-exec" ||
			strings.HasPrefix(a, "--exec=") || strings.HasPrefix(a, "--sh-exec=") ||
			len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.ContainsAny(a[1:], "e"):
			s.add(RuleReverseShell, p, c.name+" runs a program on a network connection")
		}
	}
}

// nested checks the code given to bash -c, sh -c, su -c, eval, python
// -c and node -e when it is literal.
func (s *shellWalk) nested(c command) {
	if s.depth >= s.a.maxDepth {
		return
	}
	at := func(w *syntax.Word) pos {
		if s.at.set() {
			return s.at
		}
		return pos{int(w.Pos().Line()), int(w.Pos().Col())}
	}
	switch {
	case c.name == "eval":
		var parts []string
		for i, a := range c.args {
			if !c.lits[i] {
				return
			}
			parts = append(parts, a)
		}
		if len(parts) > 0 {
			s.a.shell(strings.Join(parts, " "), at(c.words[0]), s.depth+1)
		}
	case shells[c.name] || c.name == "su" || interpreters[c.name]:
		for i, a := range c.args {
			if i+1 >= len(c.args) || !c.lits[i] {
				continue
			}
			code, ok := c.args[i+1], c.lits[i+1]
			if !ok {
				continue
			}
			switch {
			case (shells[c.name] || c.name == "su") && (a == "-c" || shortFlags(a, 'c')):
				s.a.shell(code, at(c.words[i+1]), s.depth+1)
				return
			case strings.HasPrefix(c.name, "python") && a == "-c":
				s.a.python(code, at(c.words[i+1]), s.depth+1)
				return
			case (c.name == "node" || c.name == "nodejs") && (a == "-e" || a == "--eval" || a == "-p" || a == "--print"):
				s.a.javascript(code, at(c.words[i+1]), s.depth+1)
				return
			}
		}
	}
}

// shortFlags reports whether a is a group of short flags holding f
// (bash -lc).
func shortFlags(a string, f byte) bool {
	return len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.IndexByte(a[1:], f) >= 0
}

// substituted flags a shell, interpreter, eval or source run on what a
// fetcher prints: bash <(curl ...), sh -c "$(curl ...)", eval "$(wget
// -O- ...)", . <(curl ...).
func (s *shellWalk) substituted(c command) {
	if !(shells[c.name] || interpreters[c.name] || c.name == "eval" || c.name == "source" || c.name == ".") {
		return
	}
	for _, w := range c.words {
		fetched := false
		syntax.Walk(w, func(n syntax.Node) bool {
			var stmts []*syntax.Stmt
			switch n := n.(type) {
			case *syntax.CmdSubst:
				stmts = n.Stmts
			case *syntax.ProcSubst:
				stmts = n.Stmts
			default:
				return true
			}
			for _, st := range stmts {
				syntax.Walk(st, func(n syntax.Node) bool {
					if ce, ok := n.(*syntax.CallExpr); ok && fetchers[resolve(ce).name] {
						fetched = true
					}
					return !fetched
				})
			}
			return !fetched
		})
		if fetched {
			s.add(RuleDownloadExec, w.Pos(), c.name+" runs code fetched from the network")
			return
		}
	}
}

// redirect flags redirections to /dev/tcp and writes under
// /sys/fs/cgroup.
func (s *shellWalk) redirect(r *syntax.Redirect) {
	target, ok := wordLit(r.Word)
	if !ok && target == "" {
		return
	}
	switch {
	case strings.HasPrefix(target, "/dev/tcp/") || strings.HasPrefix(target, "/dev/udp/"):
		s.add(RuleReverseShell, r.OpPos, "redirects to a network connection through "+target)
	case writes(r.Op) && under(target, "/sys/fs/cgroup"):
		s.add(RuleEscapeProbe, r.OpPos, "writes to "+target)
	case hostPath(target) != "":
		s.add(RuleEscapeProbe, r.OpPos, "reaches "+hostPath(target))
	}
}

func writes(op syntax.RedirOperator) bool {
	switch op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.RdrClob, syntax.AppClob,
		syntax.RdrAll, syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob:
		return true
	}
	return false
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
