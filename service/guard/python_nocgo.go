//go:build !cgo

package guard

// python without cgo: the tree-sitter grammar is C, so a binary built
// with CGO_ENABLED=0 cannot parse Python. It says so in a finding of
// severity info; scripts/setup.sh builds airlockd with cgo.
func (a *analysis) python(src string, at pos, depth int) {
	line, col := at.at(1, 1)
	a.c.add(RuleParseError, line, col, "python: this airlockd was built without cgo and cannot parse Python; the code was not checked")
}

// PythonParser reports whether this build parses Python.
const PythonParser = false
