package quota

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// DefaultsFile is the file in airlockd's state directory that holds the
// defaults it was started with, for the operator's CLI (which reads the
// node's store directly) to show beside the tenants' overrides.
const DefaultsFile = "quota-defaults.json"

// WriteDefaults writes the limits to path, replacing the file at once.
func WriteDefaults(path string, l Limits) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".quota-defaults-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ReadDefaults reads what WriteDefaults wrote.
func ReadDefaults(path string) (Limits, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var l Limits
	if err := json.NewDecoder(io.LimitReader(f, 64<<10)).Decode(&l); err != nil {
		return nil, fmt.Errorf("quota: %s: %w", path, err)
	}
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("quota: %s: %w", path, err)
	}
	return l, nil
}
