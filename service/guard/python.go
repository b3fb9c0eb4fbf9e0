//go:build cgo

package guard

import (
	"path"
	"strconv"
	"strings"
	"sync"

	sitter "github.com/tree-sitter/go-tree-sitter"
	sitterpython "github.com/tree-sitter/tree-sitter-python/bindings/go"
)

// pythonLanguage is the tree-sitter grammar of Python 3 (3.11's syntax:
// f-strings, the walrus, match statements; see doc.go).
var pythonLanguage = sitter.NewLanguage(sitterpython.Language())

// python checks Python code: its tree-sitter syntax tree, with import
// aliases resolved (import subprocess as sp; from os import system);
// literal strings and lists given to os.system, subprocess and friends
// are checked as shell.
func (a *analysis) python(src string, at pos, depth int) {
	if depth > a.maxDepth || a.stopped() {
		return
	}
	p := sitter.NewParser()
	defer p.Close()
	if err := p.SetLanguage(pythonLanguage); err != nil {
		return
	}
	b := []byte(src)
	// The text goes to the parser in chunks (each is copied for C), and
	// the parse stops when the check's time is up.
	tree := p.ParseWithOptions(func(i int, _ sitter.Point) []byte {
		if i >= len(b) {
			return []byte{}
		}
		return b[i:min(len(b), i+64<<10)]
	}, nil, &sitter.ParseOptions{ProgressCallback: func(sitter.ParseState) bool { return a.stopped() }})
	if tree == nil {
		return // the check's time is up
	}
	defer tree.Close()
	w := &pyWalk{a: a, src: b, at: at, depth: depth, alias: map[string]string{}, tainted: map[string]bool{},
		mayFetch: mayFetch(src)}
	root := tree.RootNode()
	top := depth == 0 && !at.set() // the code itself, not Python found inside it
	if top && !root.HasError() {
		defer func() { a.imports.Parsed = !a.stopped() }()
	}
	if root.HasError() {
		if n := firstError(root); n != nil {
			line, col := w.place(n)
			a.c.add(RuleParseError, line, col, "python: the code does not parse here; the rest was checked")
		}
	}
	w.walk(root)
	w.finish()
}

type pyWalk struct {
	a     *analysis
	src   []byte
	at    pos
	depth int
	// alias maps a local name to what it imports (sp: subprocess,
	// system: os.system).
	alias map[string]string
	// tainted names hold what was fetched from the network; mayFetch is
	// false when no module or call that fetches is named anywhere in the
	// code, and the taint is not followed.
	tainted  map[string]bool
	mayFetch bool
	// for the reverse shell: a socket, dup2 and a shell in one program.
	socket, shellSpawn bool
	// connects: the program opens connections or starts programs; pools
	// are the stratum URLs in it, findings only then.
	connects bool
	pools    []*sitter.Node
	dup2     *sitter.Node
}

// preorder visits every node of a tree in order, without recursion.
func preorder(root *sitter.Node, stop func() bool, visit func(n *sitter.Node)) {
	c := root.Walk()
	defer c.Close()
	for count := 0; ; count++ {
		if count&255 == 0 && stop() {
			return
		}
		visit(c.Node())
		if c.GotoFirstChild() {
			continue
		}
		for !c.GotoNextSibling() {
			if !c.GotoParent() {
				return
			}
		}
	}
}

func firstError(root *sitter.Node) *sitter.Node {
	var found *sitter.Node
	preorder(root, func() bool { return found != nil }, func(n *sitter.Node) {
		if found == nil && (n.IsError() || n.IsMissing()) {
			found = n
		}
	})
	return found
}

func (w *pyWalk) place(n *sitter.Node) (int, int) {
	p := n.StartPosition()
	return w.at.at(int(p.Row)+1, int(p.Column)+1)
}

func (w *pyWalk) add(rule string, n *sitter.Node, msg string) {
	line, col := w.place(n)
	w.a.c.add(rule, line, col, msg)
}

// nested is where code found in node n is reported.
func (w *pyWalk) nested(n *sitter.Node) pos {
	if w.at.set() {
		return w.at
	}
	line, col := w.place(n)
	return pos{line, col}
}

func (w *pyWalk) text(n *sitter.Node) string { return n.Utf8Text(w.src) }

// pythonQuery captures, in the order of the code, the nodes the rules
// look at: the walk happens in C, and only these come back to Go.
var pythonQuery = sync.OnceValue(func() *sitter.Query {
	q, err := sitter.NewQuery(pythonLanguage, `[(import_statement) (import_from_statement) (assignment)
		(named_expression) (augmented_assignment) (as_pattern) (call) (string) (concatenated_string)] @n`)
	if err != nil {
		panic("guard: the Python query does not compile: " + err.Message)
	}
	return q
})

func (w *pyWalk) walk(root *sitter.Node) {
	qc := sitter.NewQueryCursor()
	defer qc.Close()
	caps := qc.Captures(pythonQuery(), root, w.src)
	for count := 0; ; count++ {
		if count&63 == 0 && w.a.stopped() {
			return
		}
		m, i := caps.Next()
		if m == nil {
			return
		}
		node := m.Captures[i].Node // a copy: the match is reused by Next
		n := &node
		if w.a.importsOnly {
			switch n.Kind() {
			case "import_statement", "import_from_statement":
				w.imports(n)
			case "call":
				w.dynamicCall(n)
			}
			continue
		}
		switch n.Kind() {
		case "import_statement", "import_from_statement":
			w.imports(n)
		case "assignment", "named_expression", "augmented_assignment":
			w.assignment(n)
		case "as_pattern", "with_item":
			w.withItem(n)
		case "call":
			w.call(n)
		case "string", "concatenated_string":
			w.str(n)
		}
	}
}

// top reports whether the walk is of the code itself, whose imports
// are recorded.
func (w *pyWalk) top() bool { return w.depth == 0 && !w.at.set() }

// record notes a module the code imports.
func (w *pyWalk) record(module string) {
	if !w.top() || module == "" || strings.HasPrefix(module, ".") {
		return
	}
	w.a.imports.Modules = append(w.a.imports.Modules, module)
	if dynamicModule(module) {
		w.a.imports.Dynamic = true
	}
}

// dynamicCall notes a call that imports dynamically.
func (w *pyWalk) dynamicCall(n *sitter.Node) {
	if fn := n.ChildByFieldName("function"); fn != nil && w.top() && dynamicImport(w.qualified(fn)) {
		w.a.imports.Dynamic = true
	}
}

// imports records the aliases of an import, and the modules imported.
func (w *pyWalk) imports(n *sitter.Node) {
	module := ""
	if m := n.ChildByFieldName("module_name"); m != nil {
		module = w.text(m)
		w.record(module)
	}
	cur := n.Walk()
	defer cur.Close()
	for _, name := range n.ChildrenByFieldName("name", cur) {
		full, local := "", ""
		switch name.Kind() {
		case "dotted_name":
			full = w.text(&name)
			local = full
			if module == "" {
				w.record(full)
				// import os.path binds os
				local, _, _ = strings.Cut(full, ".")
				full = local
			}
		case "aliased_import":
			if nm := name.ChildByFieldName("name"); nm != nil {
				full = w.text(nm)
				if module == "" {
					w.record(full)
				}
			}
			if al := name.ChildByFieldName("alias"); al != nil {
				local = w.text(al)
			}
		}
		if full == "" || local == "" {
			continue
		}
		if module != "" {
			full = module + "." + full
		}
		w.alias[local] = full
	}
}

// qualified returns the dotted name of a callee, with the first part's
// import alias resolved: sp.run is subprocess.run after import
// subprocess as sp.
func (w *pyWalk) qualified(n *sitter.Node) string {
	var parts []string
	for i := 0; n != nil && i < 16; i++ {
		switch n.Kind() {
		case "identifier":
			name := w.text(n)
			if full, ok := w.alias[name]; ok {
				name = full
			}
			parts = append(parts, name)
			for l, r := 0, len(parts)-1; l < r; l, r = l+1, r-1 {
				parts[l], parts[r] = parts[r], parts[l]
			}
			return strings.Join(parts, ".")
		case "attribute":
			if at := n.ChildByFieldName("attribute"); at != nil {
				parts = append(parts, w.text(at))
			}
			n = n.ChildByFieldName("object")
		case "call":
			// requests.get(u).text: the call's callee, then ()
			parts = append(parts, "()")
			n = n.ChildByFieldName("function")
		default:
			return ""
		}
	}
	return ""
}

// Callees by kind.
var (
	pyShellCalls = set("os.system", "os.popen", "subprocess.run", "subprocess.call", "subprocess.check_call",
		"subprocess.check_output", "subprocess.Popen", "subprocess.getoutput", "subprocess.getstatusoutput",
		"commands.getoutput", "commands.getstatusoutput", "pty.spawn", "asyncio.create_subprocess_shell",
		"asyncio.create_subprocess_exec", "os.execv", "os.execve", "os.execvp", "os.execvpe", "os.execl",
		"os.execle", "os.execlp", "os.execlpe", "os.spawnv", "os.spawnve", "os.spawnvp", "os.spawnvpe",
		"os.spawnl", "os.spawnle", "os.spawnlp", "os.spawnlpe", "os.posix_spawn", "os.posix_spawnp")
	pyFetchCalls = set("urllib.request.urlopen", "urllib.urlopen", "urllib2.urlopen", "urllib.request.Request",
		"requests.get", "requests.post", "requests.request", "httpx.get", "httpx.post", "urllib3.request",
		"http.client.HTTPConnection", "http.client.HTTPSConnection", "socket.create_connection")
	pyExecCalls  = set("exec", "eval", "compile", "builtins.exec", "builtins.eval", "execfile")
	pyPrintCalls = set("print", "sys.stdout.write", "sys.stderr.write", "logging.info", "logging.debug",
		"logging.warning", "logging.error", "input", "str", "repr", "len", "re.compile", "re.search", "re.match")
	pySocketCalls = set("socket.socket", "socket.create_connection", "socket.fromfd", "socket.socketpair")
	escapeCalls   = set("mount", "umount", "umount2", "unshare", "setns", "pivot_root")
)

// fetchNames are the names without which Python code cannot fetch
// through the calls fetches knows (a shortcut: the tree decides).
var fetchNames = []string{"urlopen", "requests", "httpx", "urllib", "aiohttp", "recv", "http", "create_connection"}

func mayFetch(src string) bool {
	for _, n := range fetchNames {
		if strings.Contains(src, n) {
			return true
		}
	}
	return false
}

// fetchCall reports whether a callee fetches from the network.
func fetchCall(q string) bool {
	return pyFetchCalls[q] || strings.HasPrefix(q, "requests.") && !strings.Contains(q, "()") ||
		strings.HasPrefix(q, "aiohttp.") || strings.HasSuffix(q, ".recv") || strings.HasSuffix(q, ".urlopen")
}

// fetches reports whether an expression fetches from the network or
// uses a name that holds what was fetched.
func (w *pyWalk) fetches(n *sitter.Node) bool {
	if !w.mayFetch {
		return false
	}
	found := false
	preorder(n, func() bool { return found || w.a.stopped() }, func(m *sitter.Node) {
		switch m.Kind() {
		case "call":
			if fetchCall(w.qualified(m.ChildByFieldName("function"))) {
				found = true
			}
		case "identifier":
			if w.tainted[w.text(m)] {
				found = true
			}
		}
	})
	return found
}

// assignment taints the names bound to what was fetched.
func (w *pyWalk) assignment(n *sitter.Node) {
	left, right := n.ChildByFieldName("left"), n.ChildByFieldName("right")
	if n.Kind() == "named_expression" {
		left, right = n.ChildByFieldName("name"), n.ChildByFieldName("value")
	}
	if left == nil || right == nil || left.Kind() != "identifier" {
		return
	}
	if w.fetches(right) {
		w.tainted[w.text(left)] = true
	}
}

// withItem taints the name of with urlopen(u) as r.
func (w *pyWalk) withItem(n *sitter.Node) {
	if n.Kind() != "as_pattern" || n.NamedChildCount() < 2 {
		return
	}
	value, target := n.NamedChild(0), n.ChildByFieldName("alias")
	if target == nil {
		return
	}
	if target.Kind() == "as_pattern_target" && target.NamedChildCount() > 0 {
		target = target.NamedChild(0)
	}
	if target.Kind() == "identifier" && w.fetches(value) {
		w.tainted[w.text(target)] = true
	}
}

// args returns the positional and keyword arguments of a call.
func (w *pyWalk) args(call *sitter.Node) (pos []*sitter.Node, kw map[string]*sitter.Node) {
	kw = map[string]*sitter.Node{}
	al := call.ChildByFieldName("arguments")
	if al == nil {
		return nil, kw
	}
	if al.Kind() != "argument_list" { // f"..." or a generator
		return []*sitter.Node{al}, kw
	}
	for i := uint(0); i < al.NamedChildCount(); i++ {
		c := al.NamedChild(i)
		if c.Kind() == "keyword_argument" {
			if nm := c.ChildByFieldName("name"); nm != nil {
				kw[w.text(nm)] = c.ChildByFieldName("value")
			}
			continue
		}
		if c.Kind() == "comment" {
			continue
		}
		pos = append(pos, c)
	}
	return pos, kw
}

func (w *pyWalk) call(n *sitter.Node) {
	w.dynamicCall(n)
	fn := n.ChildByFieldName("function")
	if fn == nil {
		return
	}
	q := w.qualified(fn)
	if q == "" {
		return
	}
	args, kw := w.args(n)
	last := q[strings.LastIndexByte(q, '.')+1:]
	if pyShellCalls[q] || pySocketCalls[q] || fetchCall(q) ||
		strings.HasPrefix(q, "asyncio.open_connection") || strings.HasPrefix(q, "websocket") || strings.HasPrefix(q, "websockets.") {
		w.connects = true
	}
	switch {
	case pyShellCalls[q]:
		w.shellCall(n, q, args, kw)
	case pyExecCalls[q]:
		for _, a := range args {
			if w.fetches(a) {
				w.add(RuleDownloadExec, n, q+" runs code fetched from the network")
				break
			}
		}
	case pySocketCalls[q]:
		w.socket = true
	case q == "os.dup2" || q == "dup2":
		if w.dup2 == nil {
			w.dup2 = n
		}
	case q == "os.fork" || q == "os.forkpty" || q == "pty.fork":
		if inEndlessLoop(n, w.src) {
			w.add(RuleForkBomb, n, "forks in an endless loop")
		}
	case escapeCalls[last] && q != last && !strings.HasPrefix(q, "self."):
		w.add(RuleEscapeProbe, n, "calls "+last+", which probes the sandbox's isolation")
	case q == "open" || q == "io.open" || q == "os.open" || q == "os.mkdir" || q == "os.makedirs" ||
		strings.HasPrefix(q, "shutil.") || q == "os.symlink":
		w.cgroupWrite(n, q, args, kw)
	case last == "write_text" || last == "write_bytes" || last == "mkdir" || last == "touch":
		if obj := fn.ChildByFieldName("object"); obj != nil && obj.Kind() == "call" {
			if inner, _ := w.args(obj); len(inner) > 0 {
				if s, ok := w.literal(inner[0]); ok && under(s, "/sys/fs/cgroup") {
					w.add(RuleEscapeProbe, n, "writes under /sys/fs/cgroup")
				}
			}
		}
	}
}

// shellCall checks the command given to os.system, subprocess and the
// rest as shell: a literal string is parsed as shell, a literal list is
// an argv.
func (w *pyWalk) shellCall(n *sitter.Node, q string, args []*sitter.Node, kw map[string]*sitter.Node) {
	if len(args) == 0 {
		if v := kw["args"]; v != nil {
			args = []*sitter.Node{v}
		} else {
			return
		}
	}
	first := args[0]
	var argv []string
	switch {
	case strings.HasPrefix(q, "os.spawn"):
		// spawn*(mode, path, args...)
		if len(args) < 2 {
			return
		}
		first = args[1]
		argv = w.argv(args[2:])
	case strings.HasPrefix(q, "os.exec") || strings.HasPrefix(q, "os.posix_spawn") || q == "asyncio.create_subprocess_exec":
		argv = w.argv(args[1:])
		if len(argv) == 0 {
			if s, ok := w.literal(first); ok {
				argv = []string{s}
			}
		}
	default:
		if s, ok := w.literal(first); ok {
			if f := strings.Fields(s); len(f) > 0 && shellName(f[0]) {
				w.shellSpawn = true
			}
			w.a.shell(s, w.nested(first), w.depth+1)
		} else {
			argv = w.argv([]*sitter.Node{first})
		}
	}
	if len(argv) > 0 {
		if shellName(argv[0]) {
			w.shellSpawn = true
		}
		w.a.shellArgv(argv, w.nested(first), w.depth+1)
	}
	// Popen(["/bin/sh"], stdin=s.fileno(), ...) wires the shell to a socket.
	for _, k := range []string{"stdin", "stdout"} {
		if v := kw[k]; v != nil && strings.Contains(w.text(v), "fileno") && w.shellSpawn {
			w.dup2 = n
		}
	}
}

// argv returns the literal argv of the arguments: a list or tuple of
// strings, or the strings themselves; nil if any part is not literal.
func (w *pyWalk) argv(args []*sitter.Node) []string {
	if len(args) == 1 && (args[0].Kind() == "list" || args[0].Kind() == "tuple") {
		l := args[0]
		out := []string{}
		for i := uint(0); i < l.NamedChildCount(); i++ {
			s, ok := w.literal(l.NamedChild(i))
			if !ok {
				return out
			}
			out = append(out, s)
		}
		return out
	}
	var out []string
	for _, a := range args {
		s, ok := w.literal(a)
		if !ok {
			return out
		}
		out = append(out, s)
	}
	return out
}

// literal returns the value of a string (or concatenated strings) with
// no interpolation.
func (w *pyWalk) literal(n *sitter.Node) (string, bool) {
	switch n.Kind() {
	case "string":
		return w.stringValue(n)
	case "concatenated_string":
		var b strings.Builder
		for i := uint(0); i < n.NamedChildCount(); i++ {
			s, ok := w.literal(n.NamedChild(i))
			if !ok {
				return "", false
			}
			b.WriteString(s)
		}
		return b.String(), true
	case "parenthesized_expression":
		if n.NamedChildCount() == 1 {
			return w.literal(n.NamedChild(0))
		}
	}
	return "", false
}

// stringValue decodes a string node; ok is false for an f-string with
// interpolations (the value then holds its literal parts).
func (w *pyWalk) stringValue(n *sitter.Node) (string, bool) {
	raw, ok := false, true
	var b strings.Builder
	for i := uint(0); i < n.ChildCount(); i++ {
		c := n.Child(i)
		switch c.Kind() {
		case "string_start":
			prefix := strings.ToLower(strings.TrimRight(w.text(c), `"'`))
			raw = strings.Contains(prefix, "r")
		case "string_content":
			if raw {
				b.WriteString(w.text(c))
			} else {
				b.WriteString(pyUnescape(w.text(c)))
			}
		case "interpolation":
			ok = false
		}
	}
	return b.String(), ok
}

// pyUnescape decodes the common escapes of a Python string.
func pyUnescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		case '\n':
		case 'x':
			if i+2 < len(s) {
				if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
					b.WriteByte(byte(v))
					i += 2
					continue
				}
			}
			b.WriteString(`\x`)
		case '\\', '\'', '"':
			b.WriteByte(s[i])
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// str checks a string used in code (not a docstring, not printed) for a
// mining pool or a host path.
func (w *pyWalk) str(n *sitter.Node) {
	concatenated := n.Kind() == "concatenated_string"
	if raw := w.text(n); !concatenated && !strings.Contains(raw, `\`) && !stratum(raw) && hostPath(raw) == "" {
		return // nothing an escape could hide either
	}
	if !concatenated {
		if p := n.Parent(); p != nil && p.Kind() == "concatenated_string" {
			return // checked as a whole
		}
	}
	var s string
	if concatenated {
		var b strings.Builder
		for i := uint(0); i < n.NamedChildCount() && b.Len() < 1<<16; i++ {
			if c := n.NamedChild(i); c.Kind() == "string" {
				v, _ := w.stringValue(c)
				b.WriteString(v)
			}
		}
		s = b.String()
	} else {
		s, _ = w.stringValue(n)
	}
	if !stratum(s) && hostPath(s) == "" {
		return
	}
	if p := n.Parent(); p != nil && p.Kind() == "expression_statement" {
		return // a docstring or a bare string: data
	}
	if call := enclosingCall(n); call != nil && pyPrintCalls[w.qualified(call.ChildByFieldName("function"))] {
		return
	}
	if stratum(s) {
		node := *n
		w.pools = append(w.pools, &node) // a finding if the program connects (finish)
	} else {
		w.add(RuleEscapeProbe, n, "reaches "+hostPath(s))
	}
}

// enclosingCall returns the call n is a direct argument of (through
// concatenations and parentheses), or nil.
func enclosingCall(n *sitter.Node) *sitter.Node {
	for p := n.Parent(); p != nil; p = p.Parent() {
		switch p.Kind() {
		case "concatenated_string", "parenthesized_expression", "keyword_argument":
			continue
		case "argument_list":
			return p.Parent()
		}
		return nil
	}
	return nil
}

// inEndlessLoop reports whether n is in the body of while True (or
// while 1) with no break, in the same function.
func inEndlessLoop(n *sitter.Node, src []byte) bool {
	for p := n.Parent(); p != nil; p = p.Parent() {
		switch p.Kind() {
		case "function_definition", "lambda", "class_definition":
			return false
		case "while_statement":
			cond := p.ChildByFieldName("condition")
			if cond == nil {
				return false
			}
			c := cond.Utf8Text(src)
			if c != "True" && c != "1" {
				return false
			}
			brk := false
			preorder(p, func() bool { return brk }, func(m *sitter.Node) {
				if m.Kind() == "break_statement" || m.Kind() == "return_statement" {
					brk = true
				}
			})
			return !brk
		}
	}
	return false
}

// cgroupWrite flags open(path, "w") and mkdir of a path under
// /sys/fs/cgroup.
func (w *pyWalk) cgroupWrite(n *sitter.Node, q string, args []*sitter.Node, kw map[string]*sitter.Node) {
	var target *sitter.Node
	switch {
	case q == "open" || q == "io.open":
		if len(args) == 0 {
			return
		}
		mode := kw["mode"]
		if mode == nil && len(args) > 1 {
			mode = args[1]
		}
		m, _ := "", false
		if mode != nil {
			m, _ = w.literal(mode)
		}
		if !strings.ContainsAny(m, "wax+") {
			return
		}
		target = args[0]
	case q == "os.open":
		if len(args) < 2 || !strings.ContainsAny(w.text(args[1]), "WC") || !strings.Contains(w.text(args[1]), "O_") {
			return
		}
		target = args[0]
	default:
		if len(args) == 0 {
			return
		}
		target = args[len(args)-1]
	}
	if s, ok := w.literal(target); ok && under(path.Clean(s), "/sys/fs/cgroup") {
		w.add(RuleEscapeProbe, n, q+" writes under /sys/fs/cgroup")
	}
}

// finish adds the findings that need the whole program: a socket, dup2
// onto it and a shell make a reverse shell; a stratum URL counts in a
// program that connects.
func (w *pyWalk) finish() {
	if w.connects {
		for _, n := range w.pools {
			w.add(RuleMiningPool, n, "a mining pool (stratum) in a program that connects")
		}
	}
	if w.socket && w.dup2 != nil && w.shellSpawn {
		w.add(RuleReverseShell, w.dup2, "a shell is wired to a socket (socket, dup2, shell)")
	}
}

// PythonParser reports whether this build parses Python.
const PythonParser = true
