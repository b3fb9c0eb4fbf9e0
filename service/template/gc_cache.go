package template

import (
	"errors"
	"os"
	"path/filepath"
	"time"
)

// What Dockerfile builds leave: the step cache of the Dockerfile builder
// (package dockerfile, its Config.Dir <state>/templates/dockerfile on a
// node) and the registry images FROM pulled (BaseImages, under
// <state>/templates/from). A template's own tree is a hard-link copy of
// its build's result, so removing cache entries never takes a published
// template's files; what goes is the chance to rebuild from the cache.
//
// An entry is collected when no template lists it (template.json's
// build_cache: every entry its build used), no build in progress claims
// it (a Pin), and it was last used longer than the grace period ago: a
// step layer's layer.json and a result's rootfs.json are touched at
// every cache hit, a registry image's directory at every FROM that
// names it.

// Layout of the Dockerfile builder's cache that the collector reads.
const (
	dockerfileDir = "dockerfile"
	fromDir       = "from"
)

// cacheKinds are the step cache's entry directories and the file whose
// modification time is an entry's last use.
var cacheKinds = []struct{ dir, meta string }{
	{"layers", "layer.json"},
	{"rootfs", "rootfs.json"},
}

// cacheCandidates lists the step-cache entries and registry images under
// the templates directory dir (absolute) that used and pins leave
// unclaimed and that were last used before grace.
func cacheCandidates(dir string, used, pins map[string]bool, grace time.Duration, now time.Time) (cache, from []string, err error) {
	for _, k := range cacheKinds {
		kd := filepath.Join(dir, dockerfileDir, k.dir)
		ents, err := os.ReadDir(kd)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for _, e := range ents {
			p := filepath.Join(kd, e.Name())
			if !e.IsDir() || used[p] || pins[p] || !idle(entryStamp(p, k.meta), grace, now) {
				continue
			}
			cache = append(cache, p)
		}
	}
	fd := filepath.Join(dir, fromDir)
	ents, err := os.ReadDir(fd)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	for _, e := range ents {
		p := filepath.Join(fd, e.Name())
		if !e.IsDir() || len(e.Name()) != 64 || used[p] || pins[p] || !idle(p, grace, now) {
			continue
		}
		from = append(from, p)
	}
	return cache, from, nil
}

// entryStamp is the file whose modification time is a cache entry's
// last use: its metadata file, or the directory itself when it has none
// (an entry is renamed into place complete, so that is a damaged one).
func entryStamp(entry, meta string) string {
	if _, err := os.Lstat(filepath.Join(entry, meta)); err == nil {
		return filepath.Join(entry, meta)
	}
	return entry
}

// idle reports whether p was last modified at least grace before now.
func idle(p string, grace time.Duration, now time.Time) bool {
	fi, err := os.Lstat(p)
	return err == nil && now.Sub(fi.ModTime()) >= grace
}

// stillUnclaimed keeps of cache and from what is unclaimed and idle
// now: a build may have claimed or used an entry since they were listed.
func stillUnclaimed(dir string, cache, from []string, grace time.Duration, now time.Time) ([]string, []string, error) {
	pins, err := ReadPins(PinsDir(filepath.Join(dir, dockerfileDir)))
	if err != nil {
		return nil, nil, err
	}
	var c, f []string
	for _, p := range cache {
		meta := "layer.json"
		if filepath.Base(filepath.Dir(p)) == "rootfs" {
			meta = "rootfs.json"
		}
		if !pins[p] && idle(entryStamp(p, meta), grace, now) {
			c = append(c, p)
		}
	}
	for _, p := range from {
		if !pins[p] && idle(p, grace, now) {
			f = append(f, p)
		}
	}
	return c, f, nil
}
