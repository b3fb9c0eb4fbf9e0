package oneshot

import "strings"

// Which Python a run needs. A python-ds image keeps two warm Pythons:
// the data-science one, with numpy, pandas and matplotlib imported, and a
// light one with the standard library only, whose snapshot is a fraction
// of the size and restores and runs faster. A run gets the light one
// when its code imports none of the heavy modules. The choice is only
// about speed: either Python runs any code (the light one imports numpy
// when asked, just later), so a wrong guess costs time, never a result.

// heavyModules are the top-level modules the data-science Python has
// imported ahead (and what comes with them).
var heavyModules = map[string]bool{
	"numpy": true, "pandas": true, "matplotlib": true, "mpl_toolkits": true,
	"scipy": true, "PIL": true, "seaborn": true, "sklearn": true,
	"statsmodels": true, "sympy": true, "pylab": true, "fontTools": true,
}

// maxScanBytes bounds how much code the scan reads; beyond it the code
// gets the data-science Python.
const maxScanBytes = 256 << 10

// needsHeavyPython reports whether Python code imports one of the heavy
// modules, or imports in a way a scan cannot see (__import__,
// importlib, exec, eval), or is too large to scan.
func needsHeavyPython(code string) bool {
	if len(code) > maxScanBytes {
		return true
	}
	mods, dynamic := pythonImports(code)
	if dynamic {
		return true
	}
	for _, m := range mods {
		top, _, _ := strings.Cut(m, ".")
		if heavyModules[top] {
			return true
		}
	}
	return false
}

// pythonImports lists the modules Python code imports with import and
// from statements, at any depth (inside functions, under if, after a
// semicolon), and reports whether it also imports dynamically. It reads
// the code as Python's tokenizer does: comments, strings of every kind
// (prefixes, triple quotes, escapes), brackets and line continuations
// are skipped over, so a word "import" inside a string or a comment is
// not a statement. It runs in time linear in the code and never fails:
// code that does not tokenize gives what was found up to there.
func pythonImports(code string) (mods []string, dynamic bool) {
	sc := &pyScanner{src: code}
	atStart := true // the next token starts a statement
	for {
		tok, kind := sc.next()
		switch kind {
		case tokEOF:
			return mods, dynamic
		case tokNewline:
			atStart = true
			continue
		case tokName:
			switch tok {
			case "__import__", "importlib", "import_module", "exec", "eval", "compile", "runpy":
				dynamic = true
			}
			if atStart && tok == "import" {
				mods = append(mods, sc.importList()...)
			} else if atStart && tok == "from" {
				if m, ok := sc.fromModule(); ok {
					mods = append(mods, m)
				}
			}
		}
		// A colon at depth 0 ends a compound statement's header: a simple
		// statement may follow on the same line ("if x: import y").
		atStart = kind == tokOp && (tok == ";" || tok == ":" && sc.depth == 0)
	}
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokNewline
	tokName
	tokString
	tokNumber
	tokOp
)

// pyScanner splits Python source into the tokens pythonImports needs.
type pyScanner struct {
	src   string
	pos   int
	depth int // open brackets: newlines inside them do not end a statement
}

func isNameStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isNameChar(c byte) bool { return isNameStart(c) || c >= '0' && c <= '9' }

// next returns the next token.
func (s *pyScanner) next() (string, tokKind) {
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		switch {
		case c == '\n':
			s.pos++
			if s.depth == 0 {
				return "\n", tokNewline
			}
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			s.pos++
		case c == '\\' && s.pos+1 < len(s.src) && s.src[s.pos+1] == '\n':
			s.pos += 2 // a line continuation
		case c == '#':
			for s.pos < len(s.src) && s.src[s.pos] != '\n' {
				s.pos++
			}
		case c == '\'' || c == '"':
			s.skipString()
			return "", tokString
		case isNameStart(c):
			start := s.pos
			for s.pos < len(s.src) && isNameChar(s.src[s.pos]) {
				s.pos++
			}
			word := s.src[start:s.pos]
			// A string prefix (r, b, u, f and their pairs) before a quote.
			if s.pos < len(s.src) && (s.src[s.pos] == '\'' || s.src[s.pos] == '"') && len(word) <= 2 && isStringPrefix(word) {
				s.skipString()
				return "", tokString
			}
			return word, tokName
		case c >= '0' && c <= '9':
			for s.pos < len(s.src) && (isNameChar(s.src[s.pos]) || s.src[s.pos] == '.') {
				s.pos++
			}
			return "", tokNumber
		default:
			s.pos++
			switch c {
			case '(', '[', '{':
				s.depth++
			case ')', ']', '}':
				if s.depth > 0 {
					s.depth--
				}
			}
			return string(c), tokOp
		}
	}
	return "", tokEOF
}

func isStringPrefix(w string) bool {
	for i := 0; i < len(w); i++ {
		switch w[i] {
		case 'r', 'R', 'b', 'B', 'u', 'U', 'f', 'F':
		default:
			return false
		}
	}
	return true
}

// skipString skips a string literal starting at the quote at s.pos: one
// or three quotes, with backslash escapes; an unterminated one ends at
// the end of its line (or of the code, for a triple-quoted one).
func (s *pyScanner) skipString() {
	q := s.src[s.pos]
	triple := strings.HasPrefix(s.src[s.pos:], string([]byte{q, q, q}))
	if triple {
		s.pos += 3
	} else {
		s.pos++
	}
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		switch {
		case c == '\\':
			s.pos += 2
		case c == q && !triple:
			s.pos++
			return
		case c == q && strings.HasPrefix(s.src[s.pos:], string([]byte{q, q, q})):
			s.pos += 3
			return
		case c == '\n' && !triple:
			return
		default:
			s.pos++
		}
	}
	s.pos = min(s.pos, len(s.src))
}

// dotted reads a dotted name ("a.b.c"), or "" when none follows.
func (s *pyScanner) dotted() (string, tokKind, string) {
	var parts []string
	for {
		tok, kind := s.next()
		if kind != tokName {
			return strings.Join(parts, "."), kind, tok
		}
		parts = append(parts, tok)
		tok, kind = s.next()
		if kind != tokOp || tok != "." {
			return strings.Join(parts, "."), kind, tok
		}
	}
}

// importList reads the modules of "import a.b as c, d" after "import".
func (s *pyScanner) importList() []string {
	var out []string
	for {
		name, kind, tok := s.dotted()
		if name != "" {
			out = append(out, name)
		}
		if kind == tokName && tok == "as" {
			tok, kind = s.next() // the alias
			if kind == tokName {
				tok, kind = s.next()
			}
		}
		if kind != tokOp || tok != "," {
			s.unread(kind)
			return out
		}
	}
}

// fromModule reads the module of "from a.b import ..." after "from";
// a relative import ("from . import x") names no top-level module.
func (s *pyScanner) fromModule() (string, bool) {
	start := s.pos
	// Leading dots of a relative import.
	for s.pos < len(s.src) && (s.src[s.pos] == '.' || s.src[s.pos] == ' ') {
		s.pos++
	}
	relative := strings.Contains(s.src[start:s.pos], ".")
	name, kind, _ := s.dotted()
	s.unread(kind)
	if relative || name == "" {
		return "", false
	}
	return name, true
}

// unread makes a newline read too far count again (so the statement
// after it is seen); other tokens after an import are of no interest.
func (s *pyScanner) unread(kind tokKind) {
	if kind == tokNewline {
		s.pos--
	}
}
