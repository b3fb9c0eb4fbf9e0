package image

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"

	"github.com/airlockhq/airlock"
)

// RecipeVersion names the builder's recipe: the debootstrap options and
// every step after it. Bump it whenever a change to the builder changes
// what ends up in a rootfs, so that every image is rebuilt.
const RecipeVersion = "1"

// DeriveVersion names the recipe of a derived stage (a spec with From):
// the copy of the parent's stage and the apt-get install of the extra
// packages, before the steps every stage shares (RecipeVersion). Bump it
// whenever that path changes what ends up in a derived stage; stages of
// specs without From keep their hash.
const DeriveVersion = "1"

// ShortLen is the length of the hash prefix used in directory names.
const ShortLen = 12

// canonicalSpec is the hashed form of a spec: fixed field order, packages
// sorted and deduplicated, env sorted by key.
type canonicalSpec struct {
	Recipe   string   `json:"recipe"`
	Name     string   `json:"name"`
	Suite    string   `json:"suite"`
	Packages []string `json:"packages"`
	// From only when set, so specs without a parent hash as they did
	// before derived stages existed.
	From string      `json:"from,omitempty"`
	Env  [][2]string `json:"env"`
	// Files only when there are any, so specs without files hash as they
	// did before files existed.
	Files [][2]string `json:"files,omitempty"`
}

// Canonical returns the canonical encoding of spec that the hashes are
// computed over. Equal specs, whatever the order of their packages, have
// equal encodings.
func Canonical(spec airlock.ImageSpec) []byte {
	c := canonicalSpec{
		Recipe:   RecipeVersion,
		Name:     spec.Name,
		Suite:    spec.Suite,
		Packages: slices.Compact(slices.Sorted(slices.Values(spec.Packages))),
		From:     spec.From,
		Env:      [][2]string{},
	}
	if c.Packages == nil {
		c.Packages = []string{}
	}
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c.Env = append(c.Env, [2]string{k, spec.Env[k]})
	}
	for _, p := range slices.Sorted(maps.Keys(spec.Files)) {
		c.Files = append(c.Files, [2]string{p, spec.Files[p]})
	}
	b, err := json.Marshal(c)
	if err != nil { // strings and slices of strings always marshal
		panic(err)
	}
	return b
}

// StageHash is the hex sha256 naming the stage of spec: the rootfs before
// the agent goes in. It does not depend on the agent. The stage hash of a
// derived spec (From set) covers its parent's stage hash and
// DeriveVersion: a change to the parent makes a new stage of the child.
// The parent is looked up among the shipped specs (Specs).
func StageHash(spec airlock.ImageSpec) string {
	return stageHash(spec, shippedSpec, map[string]bool{})
}

// stageHash is StageHash with the parents found by lookup. seen holds the
// names on the way down, so that a cycle (which ValidateSpec refuses)
// ends instead of recursing for ever.
func stageHash(spec airlock.ImageSpec, lookup func(string) (airlock.ImageSpec, bool), seen map[string]bool) string {
	h := sha256.New()
	io.WriteString(h, "airlock-image-stage\n")
	h.Write(Canonical(spec))
	if spec.From != "" {
		parent := "unresolved " + spec.From
		seen[spec.Name] = true
		if p, ok := lookup(spec.From); ok && !seen[p.Name] {
			parent = stageHash(p, lookup, seen)
		}
		fmt.Fprintf(h, "\nderive %s\nparent-stage %s\n", DeriveVersion, parent)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// shippedSpec returns the shipped spec called name.
func shippedSpec(name string) (airlock.ImageSpec, bool) {
	s, err := SpecByName(name)
	return s, err == nil
}

// Hash is the hex sha256 naming the built image of spec with the agent
// whose hex sha256 is agentSHA256.
func Hash(spec airlock.ImageSpec, agentSHA256 string) string {
	h := sha256.New()
	// layout 2: the agent's channel directory; 3: /home/user -> /workspace
	io.WriteString(h, "airlock-image\nlayout 3\n")
	h.Write(Canonical(spec))
	if spec.From != "" {
		// The stage hash covers the parent's: a rebuilt parent makes a
		// new image of the child, not a stale "up to date".
		fmt.Fprintf(h, "\nstage %s", StageHash(spec))
	}
	fmt.Fprintf(h, "\nagent-sha256 %s\n", agentSHA256)
	return hex.EncodeToString(h.Sum(nil))
}

// Short returns the first ShortLen characters of a hex hash.
func Short(hash string) string {
	if len(hash) > ShortLen {
		return hash[:ShortLen]
	}
	return hash
}

// FileSHA256 returns the hex sha256 of the file at path.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
