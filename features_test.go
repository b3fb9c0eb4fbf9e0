package airlock_test

import (
	"context"
	"io"
	"testing"

	"github.com/airlockhq/airlock"
)

// pausingBackend pauses and writes pauses as streams, but cannot copy
// them, snapshot or reattach.
type pausingBackend struct{ fakeBackend }

func (pausingBackend) Pause(context.Context, airlock.Sandbox, string) error { return nil }
func (pausingBackend) Resume(context.Context, airlock.SandboxSpec, string) (airlock.Sandbox, error) {
	return nil, nil
}
func (pausingBackend) WritePaused(context.Context, string, io.Writer) error { return nil }
func (pausingBackend) ReadPaused(context.Context, io.Reader, string) error  { return nil }

// copyingBackend copies pauses but cannot pause: the copy means nothing.
type copyingBackend struct{ fakeBackend }

func (copyingBackend) CopyPaused(context.Context, string, string) error { return nil }

// Features come from the interfaces a backend implements, and from
// nothing else.
func TestFeaturesOf(t *testing.T) {
	for _, tt := range []struct {
		name string
		b    airlock.Backend
		want airlock.Features
	}{
		{"none", kernelB, airlock.Features{}},
		{"pause", pausingBackend{kernelB}, airlock.Features{Pause: true, PauseArchive: true}},
		{"copy without pause", copyingBackend{kernelB}, airlock.Features{}},
	} {
		if got := airlock.FeaturesOf(tt.b); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
