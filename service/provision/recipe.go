package provision

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
)

// snapshotRecipeVersion changes whenever the way base snapshots are made
// changes, so that old ones are rebuilt.
const snapshotRecipeVersion = "4"

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
	// Restore says a pool miss is served by restoring the recipe's base
	// snapshot instead of booting: only where readying costs more than a
	// restore (a runtime with modules imported). A sandbox with its agent
	// alone boots faster than its snapshot restores (BENCHMARKS.md), so
	// recipes without a runtime neither keep a snapshot nor restore; their
	// pool members boot.
	Restore bool
	// Flavours are lighter variants of the recipe, by name, that a request
	// whose code needs less is served by (Spec.Flavour): a Python that
	// imports nothing heavy restores and runs faster than the data-science
	// one.
	Flavours map[string]Recipe
	// Context is the language of a code context (protocol.ContextPython)
	// that pool members of the recipe hold started and idle: the recipe
	// of a session's sandbox (language ""), whose first context of that
	// language takes it (Lease.TakeReadyContext) instead of starting an
	// interpreter. Only Python: a Node context restored from a snapshot
	// cannot be reseeded (docs/performance.md).
	Context string
	// ContextPreload are modules the ready context imports up front (in
	// a first cell), so that a session's first cell finds them loaded.
	ContextPreload []string
}

// FlavourLight names the flavour of a runtime with only the standard
// library readied.
const FlavourLight = "light"

// contextPreload are the modules a session's ready Python context has
// imported: those of the light Python. (random among them: its state is
// what a restored clone must reseed, see Lease.TakeReadyContext.)
var contextPreload = []string{"json", "random", "uuid", "secrets"}

// DefaultRecipes are the recipes of the shipped images.
func DefaultRecipes() map[string]map[airlock.Language]Recipe {
	// The light Python boots faster than its snapshot restores: pool
	// members are booted and readied, and a miss boots and runs python3
	// as anywhere. The data-science one restores: its imports take
	// longer than a restore.
	light := Recipe{Runtime: protocol.RuntimePython, Preload: []string{"json", "random", "uuid", "secrets"}}
	plain := map[airlock.Language]Recipe{
		// A session's sandbox: its agent and an idle Python context,
		// booted (the context's interpreter imports no more than the
		// light Python does).
		"":             {Context: protocol.ContextPython, ContextPreload: contextPreload},
		airlock.Python: light,
		// Node is not kept warm: see protocol.RuntimePython.
		airlock.Node: {},
		airlock.Bash: {},
		airlock.SQL:  {},
	}
	ds := map[airlock.Language]Recipe{}
	for k, v := range plain {
		ds[k] = v
	}
	ds[airlock.Python] = Recipe{
		Runtime: protocol.RuntimePython, Preload: []string{"json", "random", "uuid", "secrets", "numpy", "pandas", "matplotlib"}, Restore: true,
		Flavours: map[string]Recipe{FlavourLight: light},
	}
	// The data-science image's sessions restore theirs from a base
	// snapshot, as its one-shot Python does.
	ds[""] = Recipe{Context: protocol.ContextPython, ContextPreload: contextPreload, Restore: true}
	return map[string]map[airlock.Language]Recipe{"base": plain, "python-ds": ds}
}

// recipe returns the recipe of an image, language and flavour, and the
// flavour it is ("" when the image has no such flavour).
func (p *Provisioner) recipe(img *airlock.Image, lang airlock.Language, flavour string) (Recipe, string) {
	if strings.HasPrefix(img.Name, airlock.TemplateImagePrefix) {
		return templateRecipe(img), ""
	}
	r := p.cfg.Recipes[img.Name][lang]
	if f, ok := r.Flavours[flavour]; ok && flavour != "" {
		return f, flavour
	}
	return r, ""
}

// templateRecipe is the recipe of a template's image, for every
// language: no runtime or context is readied (the image need not hold
// the interpreter ours expects), and a template with a start_cmd or a
// ready_cmd restores from its base snapshot, which holds the started
// program after ready_cmd succeeded: that is what costs time to ready,
// as the data-science imports do for python-ds. A template with neither
// is its agent alone, which boots faster than it restores (as base's
// sessions do): its pool members boot.
func templateRecipe(img *airlock.Image) Recipe {
	return Recipe{Restore: img.StartCmd != "" || img.ReadyCmd != ""}
}

// HasFlavour reports whether an image's language has the named flavour.
func (p *Provisioner) HasFlavour(img *airlock.Image, lang airlock.Language, flavour string) bool {
	_, ok := p.cfg.Recipes[img.Name][lang].Flavours[flavour]
	return ok
}

// warmKey names the ready state of one image and language on one backend
// under the given limits, recipe and runtime version: pool members and
// snapshots of one key are interchangeable.
type warmKey struct {
	backend airlock.Backend
	img     *airlock.Image
	lang    airlock.Language // "" for the agent alone (sessions)
	flavour string           // "" for the recipe itself
	limits  airlock.Limits
	recipe  Recipe
	// ctxMem is the address-space limit of the recipe's ready context
	// (the session's ProcessMemoryBytes); 0 without one.
	ctxMem int64
	id     string // content hash of all of the above
}

// keyFor returns the warm key of an image and language on backend b, and
// false when b cannot snapshot (its sandboxes are always made fresh).
func (p *Provisioner) keyFor(b airlock.Backend, img *airlock.Image, lang airlock.Language, flavour string, l airlock.Limits, ctxMem int64) (warmKey, bool) {
	snap, ok := b.(airlock.Snapshotter)
	if !ok {
		return warmKey{}, false
	}
	r, flavour := p.recipe(img, lang, flavour)
	h := sha256.New()
	fmt.Fprintf(h, "recipe=%s\nbackend=%s\nimage=%s\nruntime-version=%s\nlang=%s\nflavour=%s\nruntime=%s\npreload=%s\nenv=%s\n",
		snapshotRecipeVersion, b.Name(), img.Hash, snap.SnapshotVersion(), lang, flavour, r.Runtime,
		strings.Join(r.Preload, ","), strings.Join(ProgramEnv, ","))
	fmt.Fprintf(h, "cpus=%g\nmemory=%d\ndisk=%d\npids=%d\n", l.CPUs, l.MemoryBytes, l.DiskBytes, l.Pids)
	if r.Context == "" {
		ctxMem = 0
	} else {
		// Only here: the keys of recipes without a context (and their
		// snapshots on disk) stay what they were.
		fmt.Fprintf(h, "context=%s\ncontext-memory=%d\ncontext-preload=%s\n", r.Context, ctxMem, strings.Join(r.ContextPreload, ","))
	}
	return warmKey{backend: b, img: img, lang: lang, flavour: flavour, limits: l, recipe: r, ctxMem: ctxMem, id: hex.EncodeToString(h.Sum(nil))}, true
}

// restores reports whether a miss of k restores its base snapshot.
func (k warmKey) restores() bool {
	return k.recipe.Restore && (k.recipe.Runtime != "" || k.recipe.Context != "" || k.img.StartCmd != "" || k.img.ReadyCmd != "")
}

// template reports whether k is of a template's image: its pool follows
// its own arrivals (PoolConfig.TemplateMax, TemplateIdle).
func (k warmKey) template() bool { return strings.HasPrefix(k.img.Name, airlock.TemplateImagePrefix) }

// langLabel is the key's language in names and metric labels: "agent"
// for a sandbox readied with its agent alone (a session's).
func (k warmKey) langLabel() string {
	switch {
	case k.lang == "":
		return "agent"
	case k.flavour != "":
		return string(k.lang) + "-" + k.flavour
	}
	return string(k.lang)
}

// name is a readable, unique directory or label name for the key.
func (k warmKey) name() string { return fmt.Sprintf("%s-%s-%s", k.img.Name, k.langLabel(), k.id[:12]) }
