package manager

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/protocol"
)

// snapshotRecipeVersion changes whenever the way base snapshots are made
// changes, so that old ones are rebuilt.
const snapshotRecipeVersion = "2"

// Recipe says how a sandbox is made ready for one language of one image
// before any request: which runtime the agent starts and what it imports.
// That state is what the base snapshot saves and pool members hold.
type Recipe struct {
	Runtime string   // a protocol.Runtime*, or "" for none (bash, sql)
	Preload []string // modules the runtime imports up front
}

// DefaultRecipes are the recipes of the shipped images.
func DefaultRecipes() map[string]map[airlock.Language]Recipe {
	plain := map[airlock.Language]Recipe{
		airlock.Python: {Runtime: protocol.RuntimePython, Preload: []string{"json", "random", "uuid", "secrets"}},
		// Node is not kept warm: see protocol.RuntimePython.
		airlock.Node: {},
		airlock.Bash: {},
		airlock.SQL:  {},
	}
	ds := map[airlock.Language]Recipe{}
	for k, v := range plain {
		ds[k] = v
	}
	ds[airlock.Python] = Recipe{Runtime: protocol.RuntimePython, Preload: []string{"json", "random", "uuid", "secrets", "numpy", "pandas", "matplotlib"}}
	return map[string]map[airlock.Language]Recipe{"base": plain, "python-ds": ds}
}

// warmKey names the ready state of one image and language under the
// current limits, recipe and runtime version: pool members and snapshots
// of one key are interchangeable.
type warmKey struct {
	img    *airlock.Image
	lang   airlock.Language
	recipe Recipe
	id     string // content hash of all of the above
}

func (m *Manager) keyFor(img *airlock.Image, lang airlock.Language) warmKey {
	r := m.cfg.Recipes[img.Name][lang]
	l := m.cfg.Limits
	h := sha256.New()
	fmt.Fprintf(h, "recipe=%s\nimage=%s\nruntime-version=%s\nlang=%s\nruntime=%s\npreload=%s\nenv=%s\n",
		snapshotRecipeVersion, img.Hash, m.runtimeVersion, lang, r.Runtime,
		strings.Join(r.Preload, ","), strings.Join(programEnv, ","))
	fmt.Fprintf(h, "cpus=%g\nmemory=%d\ndisk=%d\npids=%d\n", l.CPUs, l.MemoryBytes, l.DiskBytes, l.Pids)
	return warmKey{img: img, lang: lang, recipe: r, id: hex.EncodeToString(h.Sum(nil))}
}

// name is a readable, unique directory or label name for the key.
func (k warmKey) name() string { return fmt.Sprintf("%s-%s-%s", k.img.Name, k.lang, k.id[:12]) }
