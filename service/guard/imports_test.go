//go:build cgo

package guard_test

import (
	"context"
	"slices"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/guard"
)

// The imports come from the guard's parse: the same whether the code is
// checked (Inspect) or only parsed for them (PythonImports).
func TestPythonImports(t *testing.T) {
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	unparsed := []string{"-"}
	tests := []struct {
		code    string
		mods    []string // unparsed: Parsed is false
		dynamic bool
	}{
		{"print(1)", nil, false},
		{"import json\nprint(json.dumps(1))", []string{"json"}, false},
		{"import numpy as np, os.path\n", []string{"numpy", "os.path"}, false},
		{"from matplotlib import pyplot as plt", []string{"matplotlib"}, false},
		{"from matplotlib.pyplot import (plot,\n  show)\nimport sys", []string{"matplotlib.pyplot", "sys"}, false},
		{"def f():\n    import pandas\n    return pandas", []string{"pandas"}, false},
		{"if True: import scipy.stats", []string{"scipy.stats"}, false},
		{"x = 1; import PIL.Image", []string{"PIL.Image"}, false},
		{"from . import sibling\nfrom .pkg import x", nil, false},
		// Words in strings and comments are not statements.
		{"# import numpy\nprint('import numpy')", nil, false},
		{"s = '''\nimport numpy\n'''\nprint(s)", nil, false},
		{"s = r\"import numpy \\\" still\"\nprint(s)", nil, false},
		{"s = f'{1}' # import pandas", nil, false},
		{"x = 1 + \\\n 2\nimport numpy", []string{"numpy"}, false},
		// Imports no statement shows.
		{"m = __import__('numpy')", nil, true},
		{"import importlib\nimportlib.import_module('pandas')", []string{"importlib"}, true},
		{"from importlib import import_module as im\nim('pandas')", []string{"importlib"}, true},
		{"exec('import numpy')", nil, true},
		// Python inside a string run as shell is not the code's import.
		{"import os\nos.system(\"python3 -c 'import numpy'\")", []string{"os"}, false},
		// Code that does not parse: nothing is known.
		{"import", unparsed, false},
		{"s = '''never ends\nimport numpy", unparsed, false},
	}
	ctx := context.Background()
	for _, tt := range tests {
		for name, imp := range map[string]guard.Imports{
			"PythonImports": g.PythonImports(ctx, tt.code),
			"Inspect":       g.Inspect(ctx, airlock.Python, tt.code).Imports,
		} {
			if slices.Equal(tt.mods, unparsed) {
				if imp.Parsed {
					t.Errorf("%s %q: parsed, want not (%+v)", name, tt.code, imp)
				}
				continue
			}
			if !imp.Parsed || !slices.Equal(imp.Modules, tt.mods) || imp.Dynamic != tt.dynamic {
				t.Errorf("%s %q: %+v, want modules %q dynamic %v", name, tt.code, imp, tt.mods, tt.dynamic)
			}
		}
	}
	if imp := g.Inspect(ctx, airlock.Bash, "import numpy"); imp.Imports.Parsed {
		t.Error("shell code has Python imports")
	}
}
