package oneshot

import (
	"context"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/guard"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/run"
)

// Which Python a run needs. A python-ds image keeps two warm Pythons:
// the data-science one, with numpy, pandas and matplotlib imported, and a
// light one with the standard library only, whose snapshot is a fraction
// of the size and restores and runs faster. A run gets the light one
// when its code imports none of the heavy modules. The choice is only
// about speed: either Python runs any code (the light one imports numpy
// when asked, just later), so a wrong guess costs time, never a result.
// The imports are those of the guard's parse of the code (run.Imports),
// so the code is parsed once.

// heavyModules are the top-level modules the data-science Python has
// imported ahead (and what comes with them).
var heavyModules = map[string]bool{
	"numpy": true, "pandas": true, "matplotlib": true, "mpl_toolkits": true,
	"scipy": true, "PIL": true, "seaborn": true, "sklearn": true,
	"statsmodels": true, "sympy": true, "pylab": true, "fontTools": true,
}

// maxScanBytes bounds the code whose imports decide; larger code gets
// the data-science Python.
const maxScanBytes = 256 << 10

// flavour picks the warm runtime a run needs: the light Python when its
// code imports nothing heavy and the image has one.
func (m *Manager) flavour(ctx context.Context, img *airlock.Image, req airlock.ExecuteRequest, rec run.Record) string {
	if req.Language != airlock.Python || len(req.Code) > maxScanBytes ||
		!m.cfg.Provisioner.HasFlavour(img, req.Language, provision.FlavourLight) {
		return ""
	}
	if needsHeavyPython(m.cfg.Runner.Imports(ctx, rec)) {
		return ""
	}
	return provision.FlavourLight
}

// needsHeavyPython reports whether Python code with these imports needs
// the data-science Python: it imports one of the heavy modules, imports
// in a way no statement shows, or its imports are not known.
func needsHeavyPython(imp guard.Imports) bool {
	if !imp.Parsed || imp.Dynamic {
		return true
	}
	for _, m := range imp.Modules {
		top, _, _ := strings.Cut(m, ".")
		if heavyModules[top] {
			return true
		}
	}
	return false
}
