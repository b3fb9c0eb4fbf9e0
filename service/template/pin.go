package template

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Pin is a build's claim on the cache entries it uses (the Dockerfile
// builder's step layers and results, the registry image its FROM
// names): a file listing their paths, rewritten whole (and renamed into
// place) as the build adds entries, removed when the build ends. The
// garbage collector keeps every entry a pin lists, in this process or
// another (airlock node image prune beside a running airlockd). A pin a
// crashed build left keeps its entries until the owner of the directory
// clears it at its next start.
type Pin struct {
	path string

	mu    sync.Mutex
	paths []string
}

// PinsDir is where the Dockerfile builder whose cache is cacheDir keeps
// the pins of its builds: in its tmp directory, which it clears when it
// starts.
func PinsDir(cacheDir string) string { return filepath.Join(cacheDir, "tmp", "pins") }

// NewPin starts a claim, recorded in a new file in dir.
func NewPin(dir string) (*Pin, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pin: %w", err)
	}
	f, err := os.CreateTemp(dir, "pin-*.json")
	if err != nil {
		return nil, fmt.Errorf("pin: %w", err)
	}
	_, err = f.WriteString("[]")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, fmt.Errorf("pin: %w", err)
	}
	return &Pin{path: f.Name()}, nil
}

// Add claims paths (absolute); they are on disk when Add returns.
func (p *Pin) Add(paths ...string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, x := range paths {
		p.paths = append(p.paths, filepath.Clean(x))
	}
	b, _ := json.Marshal(p.paths)
	tmp := p.path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("pin: %w", err)
	}
	if err := os.Rename(tmp, p.path); err != nil {
		return fmt.Errorf("pin: %w", err)
	}
	return nil
}

// Release ends the claim.
func (p *Pin) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	os.Remove(p.path)
}

// ReadPins returns every path a pin in dir claims. A pin that cannot be
// read (other than one released meanwhile) is an error: the caller must
// then remove nothing it might claim.
func ReadPins(dir string) (map[string]bool, error) {
	out := map[string]bool{}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue // a pin being rewritten: its .json is the whole of it
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // released
		}
		if err != nil {
			return nil, err
		}
		var paths []string
		if err := json.Unmarshal(b, &paths); err != nil {
			return nil, fmt.Errorf("pin %s: %w", e.Name(), err)
		}
		for _, p := range paths {
			out[filepath.Clean(p)] = true
		}
	}
	return out, nil
}
