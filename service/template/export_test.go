package template

import (
	"context"
	"io"
)

// WriteArchive is writeArchive, for the tests of pulls.
func WriteArchive(ctx context.Context, dir string, w io.Writer) error {
	return writeArchive(ctx, dir, w)
}

// PullWaiters is how many requests wait for the pull of a template now.
func (s *Service) PullWaiters(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.pulls[id]; c != nil {
		return c.waiters
	}
	return 0
}
