package provision

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
const snapshotRecipeVersion = "3"

// ProgramEnv is added to the image's environment of the programs a
// one-shot run starts, and of the warm runtimes that run them: the two
// must match.
var ProgramEnv = []string{
	"PYTHONUNBUFFERED=1",        // output written before a kill is not lost
	"PYTHONDONTWRITEBYTECODE=1", // the rootfs is read-only
}

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

// warmKey names the ready state of one image and language on one backend
// under the given limits, recipe and runtime version: pool members and
// snapshots of one key are interchangeable.
type warmKey struct {
	backend airlock.Backend
	img     *airlock.Image
	lang    airlock.Language // "" for the agent alone (sessions)
	limits  airlock.Limits
	recipe  Recipe
	id      string // content hash of all of the above
}

// keyFor returns the warm key of an image and language on backend b, and
// false when b cannot snapshot (its sandboxes are always made fresh).
func (p *Provisioner) keyFor(b airlock.Backend, img *airlock.Image, lang airlock.Language, l airlock.Limits) (warmKey, bool) {
	snap, ok := b.(airlock.Snapshotter)
	if !ok || !b.Capabilities().Snapshot {
		return warmKey{}, false
	}
	r := p.cfg.Recipes[img.Name][lang]
	h := sha256.New()
	fmt.Fprintf(h, "recipe=%s\nbackend=%s\nimage=%s\nruntime-version=%s\nlang=%s\nruntime=%s\npreload=%s\nenv=%s\n",
		snapshotRecipeVersion, b.Name(), img.Hash, snap.SnapshotVersion(), lang, r.Runtime,
		strings.Join(r.Preload, ","), strings.Join(ProgramEnv, ","))
	fmt.Fprintf(h, "cpus=%g\nmemory=%d\ndisk=%d\npids=%d\n", l.CPUs, l.MemoryBytes, l.DiskBytes, l.Pids)
	return warmKey{backend: b, img: img, lang: lang, limits: l, recipe: r, id: hex.EncodeToString(h.Sum(nil))}, true
}

// langLabel is the key's language in names and metric labels: "agent"
// for a sandbox readied with its agent alone (a session's).
func (k warmKey) langLabel() string {
	if k.lang == "" {
		return "agent"
	}
	return string(k.lang)
}

// name is a readable, unique directory or label name for the key.
func (k warmKey) name() string { return fmt.Sprintf("%s-%s-%s", k.img.Name, k.langLabel(), k.id[:12]) }
