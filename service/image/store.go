package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// StoreConfig configures a Store.
type StoreConfig struct {
	// StateDir is the node's state directory; images live in StateDir/images.
	StateDir string
	// AgentPath, if set, is the agent the node runs: Resolve then returns
	// only an image built from the current spec with this agent. The agent
	// is hashed once, when the store is made: replacing the file under a
	// running server does not change which images it uses.
	AgentPath string
}

// Validate checks c.
func (c *StoreConfig) Validate() error {
	if c.StateDir == "" {
		return errors.New("image store: no state directory")
	}
	return nil
}

// Store finds built images under StateDir/images.
type Store struct {
	cfg       StoreConfig
	imagesDir string

	mu       sync.Mutex
	agentKey string // path, size, mtime of the hashed agent
	agentSum string
	building map[string]time.Time // images being built on this node, since

	// The last scan, reused while the images directory is unchanged (an
	// image appears or goes by a rename or removal in it, which changes
	// its modification time).
	scanned   []built
	scannedAt time.Time
}

var _ airlock.ImageResolver = (*Store)(nil)

// NewStore validates cfg and returns a Store.
func NewStore(cfg StoreConfig) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	state, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, imagesDir: filepath.Join(state, "images")}, nil
}

// built is one final image on disk.
type built struct {
	dir string
	m   *Manifest
}

// scan returns the complete final images, newest first.
func (s *Store) scan() ([]built, error) {
	fi, err := os.Stat(s.imagesDir)
	if err == nil {
		s.mu.Lock()
		if s.scanned != nil && fi.ModTime().Equal(s.scannedAt) {
			out := s.scanned
			s.mu.Unlock()
			return out, nil
		}
		s.mu.Unlock()
	}
	out, err := s.scanDir()
	if err == nil && fi != nil && out != nil {
		s.mu.Lock()
		s.scanned, s.scannedAt = out, fi.ModTime()
		s.mu.Unlock()
	}
	return out, err
}

func (s *Store) scanDir() ([]built, error) {
	ents, err := os.ReadDir(s.imagesDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []built
	for _, e := range ents {
		if !e.IsDir() || e.Name() == "stages" || e.Name() == "guests" || e.Name()[0] == '.' {
			continue
		}
		dir := filepath.Join(s.imagesDir, e.Name())
		m, err := readManifest(dir)
		if err != nil || e.Name() != m.Name+"-"+Short(m.Hash) {
			continue // not a finished image
		}
		out = append(out, built{dir, m})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].m.BuiltAt.Equal(out[j].m.BuiltAt) {
			return out[i].m.BuiltAt.After(out[j].m.BuiltAt)
		}
		return out[i].dir < out[j].dir
	})
	return out, nil
}

// agentSHA256 hashes the configured agent, again only when it changed.
func (s *Store) agentSHA256() (string, error) {
	fi, err := os.Stat(s.cfg.AgentPath)
	if err != nil {
		return "", fmt.Errorf("agent: %w", err)
	}
	key := fmt.Sprintf("%s|%d|%d", s.cfg.AgentPath, fi.Size(), fi.ModTime().UnixNano())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.agentSum != "" || key == s.agentKey {
		return s.agentSum, nil
	}
	sum, err := FileSHA256(s.cfg.AgentPath)
	if err != nil {
		return "", fmt.Errorf("agent: %w", err)
	}
	s.agentKey, s.agentSum = key, sum
	return sum, nil
}

// want returns the hash Resolve must find for name, or "" if any build
// of name will do (no agent configured, or name is not a shipped spec).
func (s *Store) want(name string) (string, error) {
	if s.cfg.AgentPath == "" {
		return "", nil
	}
	spec, err := SpecByName(name)
	if err != nil {
		return "", nil
	}
	sum, err := s.agentSHA256()
	if err != nil {
		return "", err
	}
	return Hash(spec, sum), nil
}

// Resolve returns the newest built image called name; with an agent
// configured, only one built from the current spec and that agent.
func (s *Store) Resolve(ctx context.Context, name string) (*airlock.Image, error) {
	want, err := s.want(name)
	if err != nil {
		return nil, err
	}
	all, err := s.scan()
	if err != nil {
		return nil, err
	}
	found := false
	for _, b := range all {
		if b.m.Name != name {
			continue
		}
		found = true
		if want == "" || b.m.Hash == want {
			return b.m.image(b.dir), nil
		}
	}
	if err := s.buildingErr(name); err != nil {
		return nil, err
	}
	if _, err := SpecByName(name); err != nil && !found {
		return nil, err
	}
	if found {
		return nil, airlock.Errorf(airlock.ENOTFOUND, "image %q is not built for the current agent (want %s); run: airlock image build %s", name, Short(want), name)
	}
	return nil, airlock.Errorf(airlock.ENOTFOUND, "image %q is not built; run: airlock image build %s", name, name)
}

// List returns every built image, by name, newest first within a name.
func (s *Store) List(ctx context.Context) ([]airlock.Image, error) {
	all, err := s.scan()
	if err != nil {
		return nil, err
	}
	out := make([]airlock.Image, 0, len(all))
	for _, b := range all {
		out = append(out, *b.m.image(b.dir))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Prune removes, for every name, the final images other than the one
// Resolve returns (or the newest, if it returns none), then the microVM
// guest artefacts and the stages no remaining image was made from. It
// returns the directories it removed. It knows of no sandbox: Collect
// with the rootfs sandboxes use keeps theirs.
func (s *Store) Prune(ctx context.Context) ([]string, error) {
	c, err := s.Collect(ctx, CollectConfig{})
	if c == nil {
		return nil, err
	}
	return c.Removed, err
}
