package oneshot

import (
	"slices"
	"strings"
	"testing"
)

func TestPythonImports(t *testing.T) {
	tests := []struct {
		code    string
		mods    []string
		dynamic bool
		heavy   bool
	}{
		{"print(1)", nil, false, false},
		{"import json\nprint(json.dumps(1))", []string{"json"}, false, false},
		{"import numpy as np, os.path\n", []string{"numpy", "os.path"}, false, true},
		{"from matplotlib import pyplot as plt", []string{"matplotlib"}, false, true},
		{"from matplotlib.pyplot import (plot,\n  show)\nimport sys", []string{"matplotlib.pyplot", "sys"}, false, true},
		{"def f():\n    import pandas\n    return pandas", []string{"pandas"}, false, true},
		{"if True: import scipy.stats", []string{"scipy.stats"}, false, true},
		{"x = 1; import PIL.Image", []string{"PIL.Image"}, false, true},
		{"from . import sibling\nfrom .pkg import x", nil, false, false},
		// Words in strings and comments are not statements.
		{"# import numpy\nprint('import numpy')", nil, false, false},
		{"s = '''\nimport numpy\n'''\nprint(s)", nil, false, false},
		{"s = r\"import numpy \\\" still\"\nprint(s)", nil, false, false},
		{"s = f'{1}' # import pandas", nil, false, false},
		{"x = (1,\nimport_ := 2)", nil, false, false},
		{"print('xmrig'); numpy = 1", nil, false, false},
		// A continuation line keeps the statement going.
		{"x = 1 + \\\n 2\nimport numpy", []string{"numpy"}, false, true},
		// Dynamic imports cannot be seen: the heavy Python, to be safe.
		{"m = __import__('numpy')", nil, true, true},
		{"import importlib\nimportlib.import_module('pandas')", []string{"importlib"}, true, true},
		{"exec('import numpy')", nil, true, true},
		// Broken code gives what was found so far.
		{"import", nil, false, false},
		{"from", nil, false, false},
		{"s = 'unterminated\nimport numpy", []string{"numpy"}, false, true},
		{"s = '''never ends\nimport numpy", nil, false, false},
	}
	for _, tt := range tests {
		mods, dyn := pythonImports(tt.code)
		if !slices.Equal(mods, tt.mods) || dyn != tt.dynamic {
			t.Errorf("%q: imports %q dynamic %v, want %q %v", tt.code, mods, dyn, tt.mods, tt.dynamic)
		}
		if got := needsHeavyPython(tt.code); got != tt.heavy {
			t.Errorf("%q: heavy %v, want %v", tt.code, got, tt.heavy)
		}
	}
	if !needsHeavyPython(strings.Repeat("x = 1\n", maxScanBytes)) {
		t.Error("code too large to scan did not get the heavy Python")
	}
}

// The scan reads hostile code: it must never panic or loop, whatever the
// bytes.
func FuzzPythonImports(f *testing.F) {
	for _, s := range []string{"import numpy", "from a.b import (c,\n d)", "'''", "\\", "r'\\", "from . import", "x = [\n", "import a as", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		mods, _ := pythonImports(code)
		for _, m := range mods {
			if m == "" || !strings.Contains(code, strings.Split(m, ".")[0]) {
				t.Fatalf("module %q is not in the code %q", m, code)
			}
		}
		needsHeavyPython(code)
	})
}
