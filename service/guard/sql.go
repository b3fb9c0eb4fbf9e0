package guard

import (
	"strings"
)

// sql checks a script for the sqlite3 command-line shell, read the way
// it reads one: a line starting with '.' where no statement is open is a
// dot-command (checked by name, with its arguments split as the shell
// splits them); everything else is SQL, split into statements and
// tokens by SQLite's lexical rules (strings, quoted identifiers,
// comments, and the semicolons inside CREATE TRIGGER ... END).
//
// A statement whose tokens hold ATTACH or load_extension is also given to
// SQLite's own parser (sqlprepare.go): where it prepares, what SQLite saw
// decides.
func (a *analysis) sql(src string) {
	stmt := sqlStatement{src: src}
	defer func() { stmt.sqlite.close() }()
	lineNo, off := 0, 0
	for rest := src; rest != "" && !a.stopped(); {
		lineNo++
		line := rest
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		lineOff := off
		off += len(line) + 1
		trimmed := strings.TrimLeft(line, " \t\r")
		if stmt.empty() && strings.HasPrefix(trimmed, ".") {
			a.dotCommand(trimmed, lineNo, len(line)-len(trimmed)+1)
			continue
		}
		stmt.feed(a, line, lineNo, lineOff)
	}
	stmt.end(a, len(src))
}

// Dot-commands of the sqlite3 shell that matter here, by full name.
var (
	dotShell = set("shell", "system")
	dotFile  = set("open", "output", "once", "read", "import", "save", "backup", "restore", "cd", "log",
		"trace", "excel", "clone")
	dotLoad = set("load")
)

// dotName returns the dot-commands a name can stand for: the shell
// takes any unambiguous-enough prefix (.sh is .shell).
func dotName(name string, names map[string]bool) bool {
	if names[name] {
		return true
	}
	if len(name) < 2 {
		return false
	}
	for full := range names {
		if strings.HasPrefix(full, name) {
			return true
		}
	}
	return false
}

func (a *analysis) dotCommand(line string, lineNo, col int) {
	args := dotArgs(line[1:])
	if len(args) == 0 {
		return
	}
	name := strings.ToLower(args[0])
	rest := strings.TrimSpace(line[1+len(firstField(line[1:])):])
	switch {
	case dotName(name, dotShell):
		a.c.add(RuleSQLShell, lineNo, col, "."+name+" runs a shell command")
		a.shell(rest, pos{lineNo, col}, 1)
		return
	case dotName(name, dotLoad):
		a.c.add(RuleSQLExtension, lineNo, col, "."+name+" loads an extension (native code)")
		return
	}
	for _, arg := range args[1:] {
		if strings.HasPrefix(arg, "|") {
			a.c.add(RuleSQLShell, lineNo, col, "."+name+" pipes through a shell command")
			a.shell(strings.TrimPrefix(arg, "|"), pos{lineNo, col}, 1)
			return
		}
	}
	if dotName(name, dotFile) && len(args) > 1 {
		a.c.add(RuleSQLFile, lineNo, col, "."+name+" reads or writes "+args[len(args)-1])
	}
}

func firstField(s string) string {
	s = strings.TrimLeft(s, " \t")
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		return s[:i]
	}
	return s
}

// dotArgs splits a dot-command's line as the sqlite3 shell does:
// whitespace between arguments, '...' and "..." quote (a quoted argument
// that starts with | is still a pipe).
func dotArgs(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r') {
			i++
		}
		if i >= len(s) {
			break
		}
		if q := s[i]; q == '\'' || q == '"' {
			j := i + 1
			for j < len(s) && s[j] != q {
				if q == '"' && s[j] == '\\' {
					j++
				}
				j++
			}
			out = append(out, s[i+1:min(j, len(s))])
			i = j + 1
			continue
		}
		j := i
		for j < len(s) && s[j] != ' ' && s[j] != '\t' && s[j] != '\r' {
			j++
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}

// sqlToken is one token of SQL: a word (keyword or identifier, upper
// case), a punctuation character, or a literal (strings and numbers,
// kind 'l').
type sqlToken struct {
	kind      byte // 'w' word, 'l' literal, or the punctuation itself
	text      string
	line, col int
	off       int // in the script
}

// sqlStatement gathers the tokens of one statement across lines; the
// lexer's state (inside a string, a comment, a trigger body) carries
// over from line to line.
type sqlStatement struct {
	src    string
	sqlite *sqlitePreparer // opened for the first statement that needs it
	toks   []sqlToken
	// open is the quote or comment a line ended inside ('\'', '"', '`',
	// ']' or '*'), 0 if none.
	open byte
	// buf is the text of a token split over lines.
	buf                    strings.Builder
	bufLine, bufCo, bufOff int
	// trigger: inside CREATE TRIGGER, where ; ends a statement of the
	// body, not the trigger, until END.
	trigger bool
	count   int // tokens seen, for the bound
}

func (s *sqlStatement) empty() bool { return len(s.toks) == 0 && s.open == 0 }

const maxSQLTokens = 1 << 16 // per statement; the rest of a huge one is skipped

func (s *sqlStatement) push(a *analysis, t sqlToken) {
	if t.kind == ';' {
		if s.trigger && !s.endsTrigger() {
			s.add(t)
			return
		}
		s.end(a, t.off+1)
		return
	}
	s.add(t)
	if !s.trigger && t.kind == 'w' && t.text == "TRIGGER" && len(s.toks) <= 3 && s.creates() {
		s.trigger = true
	}
}

func (s *sqlStatement) add(t sqlToken) {
	s.count++
	if len(s.toks) < maxSQLTokens {
		s.toks = append(s.toks, t)
	}
}

// creates reports whether the statement so far is CREATE [TEMP] TRIGGER.
func (s *sqlStatement) creates() bool {
	for _, t := range s.toks {
		if t.kind != 'w' {
			return false
		}
		switch t.text {
		case "CREATE", "TEMP", "TEMPORARY", "TRIGGER":
			continue
		}
		return false
	}
	return len(s.toks) > 0 && s.toks[0].text == "CREATE"
}

func (s *sqlStatement) endsTrigger() bool {
	n := len(s.toks)
	return n > 0 && s.toks[n-1].kind == 'w' && s.toks[n-1].text == "END"
}

// end checks the statement gathered, which ends at end (an offset in
// the script), and starts the next.
func (s *sqlStatement) end(a *analysis, end int) {
	toks := s.toks
	defer func() { s.toks, s.trigger, s.count = s.toks[:0], false, 0 }()
	if len(toks) == 0 {
		return
	}
	// EXPLAIN [QUERY PLAN] stmt is stmt.
	i := 0
	for i < len(toks) && toks[i].kind == 'w' && (toks[i].text == "EXPLAIN" || toks[i].text == "QUERY" || toks[i].text == "PLAN") {
		i++
	}
	var attach *sqlToken
	var calls []sqlToken // load_extension(
	candidate := false
	if i < len(toks) && toks[i].kind == 'w' && toks[i].text == "ATTACH" {
		attach, candidate = &toks[i], true
	}
	for j := i; j < len(toks); j++ {
		if toks[j].kind == 'w' && toks[j].text == "LOAD_EXTENSION" {
			candidate = true
			if j+1 < len(toks) && toks[j+1].kind == '(' {
				calls = append(calls, toks[j])
			}
		}
	}
	if !candidate {
		return
	}
	if s.count <= len(s.toks) && end <= len(s.src) && toks[0].off < end {
		if s.sqlite == nil {
			s.sqlite = newSQLitePreparer()
		}
		if seen, ok := s.sqlite.prepare(s.src[toks[0].off:end]); ok {
			// SQLite's parser decides.
			if seen.attach {
				at := toks[i]
				a.c.add(RuleSQLAttach, at.line, at.col, "ATTACH opens another database file")
			}
			if seen.loadExtension {
				at := toks[0]
				if len(calls) > 0 {
					at = calls[0]
				}
				a.c.add(RuleSQLExtension, at.line, at.col, "load_extension() loads native code")
			}
			return
		}
	}
	// It did not prepare (a table of the script, a trigger's body): the
	// tokens decide.
	if attach != nil {
		a.c.add(RuleSQLAttach, attach.line, attach.col, "ATTACH opens another database file")
	}
	for _, t := range calls {
		a.c.add(RuleSQLExtension, t.line, t.col, "load_extension() loads native code")
	}
}

// feed lexes one line of SQL, which starts at lineOff in the script.
func (s *sqlStatement) feed(a *analysis, line string, lineNo, lineOff int) {
	i := 0
	// a quote or comment left open by the line before
	if s.open != 0 {
		i = s.close(line, 0, lineNo)
		if s.open != 0 {
			return
		}
	}
	for i < len(line) {
		c := line[i]
		col := i + 1
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '-' && i+1 < len(line) && line[i+1] == '-':
			return // a comment to the end of the line
		case c == '/' && i+1 < len(line) && line[i+1] == '*':
			s.open, s.bufLine, s.bufCo, s.bufOff = '*', lineNo, col, lineOff+i
			i = s.close(line, i+2, lineNo)
		case c == '\'' || c == '"' || c == '`' || c == '[':
			s.open = c
			if c == '[' {
				s.open = ']'
			}
			s.buf.Reset()
			s.bufLine, s.bufCo, s.bufOff = lineNo, col, lineOff+i
			i = s.close(line, i+1, lineNo)
		case isWordByte(c):
			j := i
			for j < len(line) && isWordByte(line[j]) {
				j++
			}
			kind := byte('w')
			if c >= '0' && c <= '9' {
				kind = 'l'
			}
			s.push(a, sqlToken{kind: kind, text: strings.ToUpper(line[i:j]), line: lineNo, col: col, off: lineOff + i})
			i = j
		default:
			s.push(a, sqlToken{kind: c, text: string(c), line: lineNo, col: col, off: lineOff + i})
			i++
		}
	}
}

// close reads on from i inside the open quote or comment; it returns
// where the line goes on after it (len(line) if it stays open).
func (s *sqlStatement) close(line string, i, lineNo int) int {
	if s.open == '*' {
		if j := strings.Index(line[i:], "*/"); j >= 0 {
			s.open = 0
			return i + j + 2
		}
		return len(line)
	}
	q := s.open
	for j := i; j < len(line); j++ {
		if line[j] != q {
			continue
		}
		if q != ']' && j+1 < len(line) && line[j+1] == q { // '' inside a string
			j++
			continue
		}
		s.buf.WriteString(line[i:j])
		kind := byte('l')
		if q != '\'' {
			kind = 'w' // a quoted identifier: "load_extension"(...) is still the function
		}
		s.open = 0
		s.add(sqlToken{kind: kind, text: strings.ToUpper(s.buf.String()), line: s.bufLine, col: s.bufCo, off: s.bufOff})
		return j + 1
	}
	if s.buf.Len() < 4096 {
		s.buf.WriteString(line[i:])
		s.buf.WriteByte('\n')
	}
	return len(line)
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}
