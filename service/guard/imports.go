package guard

import (
	"strings"

	"github.com/airlockhq/airlock"
)

// Imports are the modules Python code imports, as the guard's parse of
// it found them: for the choice of a warm Python (a run that imports
// nothing heavy gets the light one), so that the code is parsed once per
// run.
type Imports struct {
	// Parsed is false when nothing is known: the code is not Python, was
	// not parsed (too large, out of time, no parser in this build) or
	// does not parse.
	Parsed bool
	// Modules are the modules of import and from statements at any
	// depth, in the order of the code; relative imports are left out.
	Modules []string
	// Dynamic: the code imports in a way no statement shows (__import__,
	// importlib, runpy, exec, eval, compile).
	Dynamic bool
}

// Report is what a check found: the findings and, for Python, the
// imports.
type Report struct {
	Findings []airlock.GuardFinding
	Imports  Imports
}

// dynamicImport reports whether a call of q (its dotted name, aliases
// resolved) imports or runs code the statements do not show.
func dynamicImport(q string) bool {
	switch q {
	case "__import__", "builtins.__import__", "exec", "eval", "compile", "builtins.exec", "builtins.eval", "execfile":
		return true
	}
	return strings.HasPrefix(q, "importlib.") || strings.HasPrefix(q, "runpy.") || strings.HasSuffix(q, "import_module")
}

// dynamicModule reports whether importing module m is a way to import
// dynamically.
func dynamicModule(m string) bool {
	top, _, _ := strings.Cut(m, ".")
	return top == "importlib" || top == "runpy"
}
