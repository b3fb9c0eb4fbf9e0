package guard

import (
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tdewolff/parse/v2"
	"github.com/tdewolff/parse/v2/js"
)

// javascript checks JavaScript (Node) code: the syntax tree of
// tdewolff/parse's ECMAScript parser; child_process bound by require or
// import is followed, and literal commands given to it are checked as
// shell.
func (a *analysis) javascript(src string, at pos, depth int) {
	if depth > a.maxDepth || a.stopped() {
		return
	}
	if nesting(src) > maxNesting {
		line, col := at.at(1, 1)
		a.c.add(RuleLimit, line, col, "javascript: nested deeper than the guard parses")
		return
	}
	// The buffer has room for the NUL the lexer appends, so the parser's
	// slices point into it: where a literal is comes from its address.
	buf := make([]byte, len(src), len(src)+1)
	copy(buf, src)
	w := &jsWalk{a: a, buf: buf, at: at, depth: depth, lines: lineStarts(src),
		cp: map[string]bool{}, cpFunc: map[string]string{}, net: map[string]bool{}}
	tree, err := js.Parse(parse.NewInputBytes(buf), js.Options{})
	if err != nil {
		line, col := at.at(1, 1)
		if pe, ok := err.(*parse.Error); ok {
			line, col = at.at(pe.Line, pe.Column)
		}
		a.c.add(RuleParseError, line, col, "javascript: "+firstLine(err.Error()))
	}
	if tree == nil {
		return
	}
	js.Walk(w, tree)
	w.finish()
}

// maxNesting bounds the brackets a recursive parser is given.
const maxNesting = 2000

// nesting returns the deepest bracket nesting of src, strings and
// comments included (an upper bound of the parser's recursion).
func nesting(src string) int {
	depth, deepest := 0, 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '(', '[', '{':
			depth++
			deepest = max(deepest, depth)
		case ')', ']', '}':
			depth = max(0, depth-1)
		}
	}
	return deepest
}

func lineStarts(src string) []int {
	starts := []int{0}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

type jsWalk struct {
	a     *analysis
	buf   []byte
	at    pos
	depth int
	lines []int
	stack []js.INode
	// names bound to child_process and net, and functions taken from
	// child_process (const {exec: run} = require(...): run is exec).
	cp     map[string]bool
	cpFunc map[string]string
	net    map[string]bool
	// for the reverse shell and download-and-execute: facts of the whole
	// program.
	sawNet, sawPipe, sawFetch bool
	shellSpawn                []byte // where
	dynamic                   [][]byte
	// cpUsed: child_process was called; pools: stratum URLs, findings
	// when the program connects.
	cpUsed, sockets bool
	pools           [][]byte
	endless         int
}

var _ js.IVisitor = (*jsWalk)(nil)

// offset returns where data (a slice of the parsed buffer) starts, or -1.
func (w *jsWalk) offset(data []byte) int {
	if len(data) == 0 {
		return -1
	}
	// Only addresses are compared; nothing is read through them.
	off := int(uintptr(unsafe.Pointer(&data[0])) - uintptr(unsafe.Pointer(&w.buf[0])))
	if off < 0 || off >= len(w.buf) || &w.buf[off] != &data[0] {
		return -1
	}
	return off
}

func (w *jsWalk) place(data []byte) (int, int) {
	off := w.offset(data)
	if off < 0 {
		return w.at.at(1, 1)
	}
	i := 0
	for lo, hi := 0, len(w.lines); lo < hi; {
		m := (lo + hi) / 2
		if w.lines[m] <= off {
			i, lo = m, m+1
		} else {
			hi = m
		}
	}
	return w.at.at(i+1, off-w.lines[i]+1)
}

func (w *jsWalk) add(rule string, data []byte, msg string) {
	line, col := w.place(data)
	w.a.c.add(rule, line, col, msg)
}

func (w *jsWalk) nestedAt(data []byte) pos {
	if w.at.set() {
		return w.at
	}
	line, col := w.place(data)
	return pos{line, col}
}

// anchor returns a slice of the source inside n to report n at.
func anchor(n js.INode) []byte {
	switch n := n.(type) {
	case *js.Var:
		return n.Data
	case *js.LiteralExpr:
		return n.Data
	case js.LiteralExpr:
		return n.Data
	case *js.DotExpr:
		if y := anchor(n.Y); y != nil {
			return y
		}
		return anchor(n.X)
	case *js.CallExpr:
		if x := anchor(n.X); x != nil {
			return x
		}
		if len(n.Args.List) > 0 {
			return anchor(n.Args.List[0].Value)
		}
	case *js.NewExpr:
		return anchor(n.X)
	case *js.TemplateExpr:
		if len(n.List) > 0 {
			return n.List[0].Value
		}
		return n.Tail
	case *js.IndexExpr:
		return anchor(n.X)
	case *js.GroupExpr:
		return anchor(n.X)
	}
	return nil
}

func (w *jsWalk) Enter(n js.INode) js.IVisitor {
	if w.a.stopped() {
		return nil
	}
	switch n := n.(type) {
	case *js.ImportStmt:
		w.importStmt(n)
	case *js.VarDecl:
		w.varDecl(n)
	case *js.WhileStmt:
		if isTrue(n.Cond) && !breaks(n.Body) {
			w.endless++
		}
	case *js.ForStmt:
		if n.Cond == nil && !breaks(n.Body) {
			w.endless++
		}
	case *js.CallExpr:
		w.call(n)
	case *js.NewExpr:
		w.newExpr(n)
	case *js.LiteralExpr:
		if n.TokenType == js.StringToken {
			w.str(n, jsUnquote(n.Data), n.Data)
		}
	case *js.TemplateExpr:
		if s, _ := w.template(n); s != "" {
			w.str(n, s, anchor(n))
		}
	}
	w.stack = append(w.stack, n)
	return w
}

func (w *jsWalk) Exit(n js.INode) {
	w.stack = w.stack[:len(w.stack)-1]
	switch n := n.(type) {
	case *js.WhileStmt:
		if isTrue(n.Cond) && !breaks(n.Body) {
			w.endless--
		}
	case *js.ForStmt:
		if n.Cond == nil && !breaks(n.Body) {
			w.endless--
		}
	}
}

func isTrue(e js.IExpr) bool {
	l, ok := e.(*js.LiteralExpr)
	return ok && (l.TokenType == js.TrueToken || string(l.Data) == "1")
}

// breaks reports whether a loop body can leave the loop.
func breaks(body js.INode) bool {
	found := false
	js.Walk(visitFunc(func(n js.INode) bool {
		switch n := n.(type) {
		case *js.BranchStmt:
			if n.Type == js.BreakToken {
				found = true
			}
		case *js.ReturnStmt, *js.ThrowStmt:
			found = true
		}
		return !found
	}), body)
	return found
}

type visitFunc func(n js.INode) bool

func (f visitFunc) Enter(n js.INode) js.IVisitor {
	if f(n) {
		return f
	}
	return nil
}
func (f visitFunc) Exit(js.INode) {}

// module returns the module a require('...') call or an import names.
func module(e js.IExpr) string {
	c, ok := e.(*js.CallExpr)
	if !ok {
		return ""
	}
	if v, ok := c.X.(*js.Var); !ok || string(v.Data) != "require" || len(c.Args.List) != 1 {
		return ""
	}
	l, ok := c.Args.List[0].Value.(*js.LiteralExpr)
	if !ok || l.TokenType != js.StringToken {
		return ""
	}
	return strings.TrimPrefix(jsUnquote(l.Data), "node:")
}

func (w *jsWalk) bind(mod, name, key string) {
	switch mod {
	case "child_process":
		if key == "" {
			w.cp[name] = true
		} else {
			w.cpFunc[name] = key
		}
	case "net", "tls":
		w.net[name] = true
		w.sawNet = true
	case "ws", "websocket", "socket.io-client", "dgram":
		w.sockets = true
	case "http", "https", "node-fetch", "axios", "got", "undici":
		w.sawFetch = true
	}
}

func (w *jsWalk) importStmt(n *js.ImportStmt) {
	mod := strings.TrimPrefix(jsUnquote(n.Module), "node:")
	if n.Default != nil {
		w.bind(mod, string(n.Default), "")
	}
	for _, al := range n.List {
		switch {
		case string(al.Name) == "*":
			w.bind(mod, string(al.Binding), "")
		case al.Name != nil:
			w.bind(mod, string(al.Binding), string(al.Name))
		case al.Binding != nil:
			w.bind(mod, string(al.Binding), string(al.Binding))
		}
	}
}

func (w *jsWalk) varDecl(n *js.VarDecl) {
	for _, el := range n.List {
		mod := module(el.Default)
		if mod == "" {
			continue
		}
		switch b := el.Binding.(type) {
		case *js.Var:
			w.bind(mod, string(b.Data), "")
		case *js.BindingObject:
			for _, item := range b.List {
				v, ok := item.Value.Binding.(*js.Var)
				if !ok {
					continue
				}
				key := string(v.Data)
				if item.Key != nil && item.Key.Literal.Data != nil {
					key = string(item.Key.Literal.Data)
				}
				w.bind(mod, string(v.Data), key)
			}
		}
	}
}

// cpMethod returns the child_process function a callee names, or "".
func (w *jsWalk) cpMethod(x js.IExpr) string {
	switch x := x.(type) {
	case *js.Var:
		return w.cpFunc[string(x.Data)]
	case *js.DotExpr:
		name := propName(x.Y)
		switch obj := x.X.(type) {
		case *js.Var:
			if w.cp[string(obj.Data)] {
				return name
			}
		case *js.CallExpr:
			if module(obj) == "child_process" {
				return name
			}
		}
	}
	return ""
}

func propName(y js.IExpr) string {
	switch y := y.(type) {
	case js.LiteralExpr:
		return string(y.Data)
	case *js.LiteralExpr:
		return string(y.Data)
	case *js.Var:
		return string(y.Data)
	}
	return ""
}

// literal returns the value of a string or a template with no
// substitution.
func (w *jsWalk) literal(e js.IExpr) (string, bool) {
	switch e := e.(type) {
	case *js.LiteralExpr:
		if e.TokenType == js.StringToken {
			return jsUnquote(e.Data), true
		}
	case *js.TemplateExpr:
		if e.Tag == nil {
			return w.template(e)
		}
	case *js.GroupExpr:
		return w.literal(e.X)
	}
	return "", false
}

// template returns the text of a template's literal parts; ok when it
// has no substitution.
func (w *jsWalk) template(t *js.TemplateExpr) (string, bool) {
	var b strings.Builder
	for _, p := range t.List {
		b.WriteString(templateText(p.Value))
	}
	b.WriteString(templateText(t.Tail))
	return b.String(), len(t.List) == 0
}

func templateText(s []byte) string {
	t := string(s)
	t = strings.TrimPrefix(t, "`")
	t = strings.TrimPrefix(t, "}")
	t = strings.TrimSuffix(t, "${")
	t = strings.TrimSuffix(t, "`")
	return jsUnescape(t)
}

func jsUnquote(data []byte) string {
	s := string(data)
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		s = s[1 : len(s)-1]
	}
	return jsUnescape(s)
}

// jsUnescape decodes the escapes of a JavaScript string.
func jsUnescape(s string) string {
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
		switch c := s[i]; c {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '\n':
		case 'x', 'u':
			n := 2
			if c == 'u' {
				n = 4
			}
			hex := ""
			if c == 'u' && i+1 < len(s) && s[i+1] == '{' {
				if j := strings.IndexByte(s[i:], '}'); j > 0 {
					hex = s[i+2 : i+j]
					i += j
				}
			} else if i+n < len(s) {
				hex = s[i+1 : i+1+n]
				i += n
			}
			if v, err := strconv.ParseUint(hex, 16, 32); err == nil && utf8.ValidRune(rune(v)) {
				b.WriteRune(rune(v))
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

var (
	jsShellMethods = set("exec", "execSync")
	jsSpawnMethods = set("spawn", "spawnSync", "execFile", "execFileSync", "fork")
	jsDynamic      = set("runInThisContext", "runInNewContext", "runInContext", "compileFunction")
	jsFsWrites     = set("writeFileSync", "writeFile", "appendFile", "appendFileSync", "mkdirSync", "mkdir",
		"createWriteStream", "openSync", "symlinkSync", "copyFileSync", "cpSync", "renameSync")
	jsPrints = set("console.log", "console.error", "console.info", "console.warn", "console.debug",
		"process.stdout.write", "process.stderr.write", "JSON.stringify", "String")
)

func (w *jsWalk) call(c *js.CallExpr) {
	if m := w.cpMethod(c.X); m != "" {
		w.childProcess(c, m)
	}
	switch x := c.X.(type) {
	case *js.Var:
		switch string(x.Data) {
		case "eval", "Function":
			if len(c.Args.List) > 0 {
				if _, lit := w.literal(c.Args.List[len(c.Args.List)-1].Value); !lit {
					w.dynamic = append(w.dynamic, x.Data)
				}
			}
		case "fetch":
			w.sawFetch = true
		}
	case *js.DotExpr:
		name := propName(x.Y)
		obj := dotted(x.X)
		switch {
		case name == "pipe":
			w.sawPipe = true
		case jsDynamic[name] && len(c.Args.List) > 0:
			if _, lit := w.literal(c.Args.List[0].Value); !lit {
				w.dynamic = append(w.dynamic, anchor(x))
			}
		case (name == "connect" || name == "createConnection") && w.net[obj]:
			w.sawNet = true
		case (name == "get" || name == "request") && (obj == "http" || obj == "https" || obj == "axios" || obj == "got"):
			w.sawFetch = true
		case jsFsWrites[name] && len(c.Args.List) > 0:
			target := c.Args.List[0].Value
			if name == "symlinkSync" || name == "copyFileSync" || name == "cpSync" || name == "renameSync" {
				target = c.Args.List[len(c.Args.List)-1].Value
			}
			if s, ok := w.literal(target); ok && under(s, "/sys/fs/cgroup") {
				w.add(RuleEscapeProbe, anchor(x), name+" writes under /sys/fs/cgroup")
			}
		}
	}
	// fetch(u).then(eval): eval given as a value
	for _, arg := range c.Args.List {
		if v, ok := arg.Value.(*js.Var); ok && (string(v.Data) == "eval" || string(v.Data) == "Function") {
			w.dynamic = append(w.dynamic, v.Data)
		}
	}
}

// dotted returns the dotted name of a.b.c, or "".
func dotted(e js.IExpr) string {
	switch e := e.(type) {
	case *js.Var:
		return string(e.Data)
	case *js.DotExpr:
		if x := dotted(e.X); x != "" {
			return x + "." + propName(e.Y)
		}
	}
	return ""
}

func (w *jsWalk) newExpr(n *js.NewExpr) {
	name := ""
	switch x := n.X.(type) {
	case *js.Var:
		name = string(x.Data)
	case *js.DotExpr:
		name = propName(x.Y)
		if name == "Socket" && w.net[dotted(x.X)] {
			w.sawNet = true
		}
	}
	if (name == "Function" || name == "Script") && n.Args != nil && len(n.Args.List) > 0 {
		if _, lit := w.literal(n.Args.List[len(n.Args.List)-1].Value); !lit {
			w.dynamic = append(w.dynamic, anchor(n))
		}
	}
}

// childProcess checks a call of child_process: exec's command as shell,
// spawn's program and literal arguments as an argv.
func (w *jsWalk) childProcess(c *js.CallExpr, method string) {
	at := anchor(c.X)
	w.cpUsed = true
	if w.endless > 0 {
		w.add(RuleForkBomb, at, "starts processes in an endless loop")
	}
	if len(c.Args.List) == 0 {
		return
	}
	first := c.Args.List[0].Value
	prog, ok := w.literal(first)
	if !ok {
		return
	}
	where := w.nestedAt(anchor(first))
	switch {
	case jsShellMethods[method]:
		if f := strings.Fields(prog); len(f) > 0 && shellName(f[0]) {
			w.shellSpawn = at
		}
		w.a.shell(prog, where, w.depth+1)
	case jsSpawnMethods[method]:
		if method == "fork" {
			return // runs a Node module, not a program
		}
		argv := []string{prog}
		if len(c.Args.List) > 1 {
			if arr, ok := c.Args.List[1].Value.(*js.ArrayExpr); ok {
				for _, el := range arr.List {
					s, ok := w.literal(el.Value)
					if !ok || el.Spread {
						break
					}
					argv = append(argv, s)
				}
			}
		}
		if shellName(prog) {
			w.shellSpawn = at
		}
		w.a.shellArgv(argv, where, w.depth+1)
	}
}

// str checks a string used in code (not printed) for a mining pool or a
// host path.
func (w *jsWalk) str(n js.INode, s string, at []byte) {
	if !stratum(s) && hostPath(s) == "" {
		return
	}
	if w.printed() {
		return
	}
	if stratum(s) {
		w.pools = append(w.pools, at) // a finding if the program connects (finish)
	} else {
		w.add(RuleEscapeProbe, at, "reaches "+hostPath(s))
	}
}

// printed reports whether the node being entered is an argument of a
// call that prints (console.log and the like).
func (w *jsWalk) printed() bool {
	for i := len(w.stack) - 1; i >= 0; i-- {
		switch n := w.stack[i].(type) {
		case *js.Arg, *js.Args, *js.GroupExpr, *js.BinaryExpr:
			continue
		case *js.CallExpr:
			return jsPrints[dotted(n.X)]
		}
		return false
	}
	return false
}

// finish adds the findings that need the whole program.
func (w *jsWalk) finish() {
	if w.sawNet || w.sawFetch || w.cpUsed || w.sockets {
		for _, at := range w.pools {
			w.add(RuleMiningPool, at, "a mining pool (stratum) in a program that connects")
		}
	}
	if w.sawNet && w.sawPipe && w.shellSpawn != nil {
		w.add(RuleReverseShell, w.shellSpawn, "a shell is piped to a network socket")
	}
	if w.sawFetch {
		for _, at := range w.dynamic {
			w.add(RuleDownloadExec, at, "runs code it builds at run time in a program that fetches from the network")
		}
	}
}
