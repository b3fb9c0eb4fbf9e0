package rest_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
)

func TestConfigValidate(t *testing.T) {
	e := setup(t)
	good := rest.Config{Store: e.store, Blobs: e.blobs, Executor: e.exec, SigningKey: e.key}
	tests := []struct {
		name string
		edit func(*rest.Config)
		ok   bool
	}{
		{"defaults", func(*rest.Config) {}, true},
		{"no store", func(c *rest.Config) { c.Store = nil }, false},
		{"no blobs", func(c *rest.Config) { c.Blobs = nil }, false},
		{"no executor", func(c *rest.Config) { c.Executor = nil }, false},
		{"no signing key", func(c *rest.Config) { c.SigningKey = nil }, false},
		{"short signing key", func(c *rest.Config) { c.SigningKey = bytes.Repeat([]byte("k"), 31) }, false},
		{"negative TTL", func(c *rest.Config) { c.ArtifactURLTTL = -time.Hour }, false},
		{"explicit values", func(c *rest.Config) { c.ArtifactURLTTL = time.Hour }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.edit(&cfg)
			err := cfg.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			s, err := rest.New(cfg)
			if (err == nil) != tt.ok || (s != nil) != tt.ok {
				t.Fatalf("New() = %v, %v", s, err)
			}
			if !tt.ok && airlock.ErrorCode(err) != airlock.EINVALID {
				t.Errorf("error code %q, want invalid", airlock.ErrorCode(err))
			}
		})
	}
}
