package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
)

// Profiles live in one file in the user's config directory
// ($XDG_CONFIG_HOME/airlock, else ~/.config/airlock), mode 0600: a server
// URL with a tenant key, an operator key or both, by name. 'airlock login'
// writes them; every command reads the one --profile or $AIRLOCK_PROFILE
// names, else the current one.

const (
	envProfile       = "AIRLOCK_PROFILE"
	profilesFile     = "profiles.json"
	defaultProfile   = "default"
	maxProfilesBytes = 1 << 20
)

// profileEntry is one profile.
type profileEntry struct {
	URL      string `json:"url"`
	APIKey   string `json:"api_key,omitempty"`
	AdminKey string `json:"admin_key,omitempty"`
	// Tenant is the tenant the key belongs to, as the server said at
	// login (for 'airlock profile ls').
	Tenant string `json:"tenant_id,omitempty"`
}

// profileSet is the profiles file.
type profileSet struct {
	Current  string                   `json:"current,omitempty"`
	Profiles map[string]*profileEntry `json:"profiles"`
}

var validProfileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// checkProfileName refuses a name that is not 1-64 letters, digits, '.',
// '_' and '-'.
func checkProfileName(name string) error {
	if !validProfileName.MatchString(name) {
		return fmt.Errorf("invalid profile name %q: use 1-64 letters, digits, '.', '_' and '-', starting with a letter or digit", name)
	}
	return nil
}

// configDir is the user's Airlock config directory.
func configDir() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no config directory for profiles: %w", err)
	}
	return filepath.Join(dir, "airlock"), nil
}

func profilesPath() (string, error) {
	dir, err := configDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, profilesFile), nil
}

// loadProfiles reads the profiles file; a missing one is an empty set.
func loadProfiles() (*profileSet, error) {
	ps := &profileSet{Profiles: map[string]*profileEntry{}}
	path, err := profilesPath()
	if err != nil {
		return ps, nil // no home: no profiles, the flags and environment still work
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return ps, nil
	} else if err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	defer f.Close()
	if err := json.NewDecoder(io.LimitReader(f, maxProfilesBytes)).Decode(ps); err != nil {
		return nil, fmt.Errorf("profiles %s: %v", path, err)
	}
	if ps.Profiles == nil {
		ps.Profiles = map[string]*profileEntry{}
	}
	return ps, nil
}

// save writes the profiles file atomically, mode 0600, in a directory of
// mode 0700.
func (ps *profileSet) save() error {
	path, err := profilesPath()
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(ps, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".profiles-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// names returns the profile names, sorted.
func (ps *profileSet) names() []string {
	out := make([]string, 0, len(ps.Profiles))
	for n := range ps.Profiles {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// selectedProfile is the name asked for: flag, then $AIRLOCK_PROFILE; ""
// for none. explicit says whether one was asked for.
func selectedProfile(flagValue string) (name string, explicit bool) {
	if flagValue != "" {
		return flagValue, true
	}
	if v := os.Getenv(envProfile); v != "" {
		return v, true
	}
	return "", false
}

// pick returns the profile to use: the one asked for (an error if it does
// not exist), else the current one, else "default" if there is one, else
// nil.
func (ps *profileSet) pick(flagValue string) (string, *profileEntry, error) {
	name, explicit := selectedProfile(flagValue)
	if explicit {
		p := ps.Profiles[name]
		if p == nil {
			return name, nil, fmt.Errorf("no profile named %q (make it with: airlock login --profile %s --url URL)", name, name)
		}
		return name, p, nil
	}
	for _, n := range []string{ps.Current, defaultProfile} {
		if p := ps.Profiles[n]; n != "" && p != nil {
			return n, p, nil
		}
	}
	return "", nil, nil
}
