package image

import (
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
)

// buildingRetry is the Retry-After of a request for an image being built.
const buildingRetry = 30 * time.Second

// Building marks the image called name as being built on this node since
// since: until Built, Resolve answers a request for it that finds no
// build with airlock.ErrImageBuilding (503, retry) instead of "not built".
func (s *Store) Building(name string, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.building == nil {
		s.building = map[string]time.Time{}
	}
	s.building[name] = since
}

// Built ends what Building began, whether or not the build succeeded.
func (s *Store) Built(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.building, name)
}

// buildingErr returns airlock.ErrImageBuilding, explained, if name is being built.
func (s *Store) buildingErr(name string) error {
	s.mu.Lock()
	since, ok := s.building[name]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	return &airlock.Error{
		Code: airlock.EUNAVAILABLE, Type: airlock.ProblemImageBuilding, RetryAfter: buildingRetry, Err: airlock.ErrImageBuilding,
		Message: fmt.Sprintf("image %q is being built on this node (for %s so far; the first build takes several minutes); try again later", name, time.Since(since).Round(time.Second)),
	}
}
