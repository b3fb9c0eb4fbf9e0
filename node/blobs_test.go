package node

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/secretscan"
)

func TestSigningKey(t *testing.T) {
	dir := t.TempDir()
	key := strings.Repeat("ab", 32)
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	for _, tt := range []struct {
		name string
		file string
		want string // "" for an error
	}{
		{"shared key with newline", write("ok.key", key+"\n", 0o600), key},
		{"shared key without newline", write("ok2.key", key, 0o400), key},
		{"readable by others", write("open.key", key, 0o644), ""},
		{"too short", write("short.key", "abc\n", 0o600), ""},
		{"missing", filepath.Join(dir, "none.key"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BlobConfig{SigningKeyFile: tt.file}.signingKey(dir)
			if tt.want == "" {
				if err == nil || !strings.Contains(err.Error(), "--signing-key-file") {
					t.Errorf("signingKey = %q, %v; want an error naming the flag", got, err)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("signingKey = %q, %v; want %q", got, err, tt.want)
			}
		})
	}

	// Without a file: the node's own key, made once in the state directory.
	state := t.TempDir()
	a, err := BlobConfig{}.signingKey(state)
	if err != nil || len(a) < 32 {
		t.Fatalf("own key: %d bytes, %v", len(a), err)
	}
	b, err := BlobConfig{}.signingKey(state)
	if err != nil || !bytes.Equal(a, b) {
		t.Errorf("own key changed between starts: %v", err)
	}
}

func TestBlobSecretsKnown(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "signing.key")
	os.WriteFile(keyFile, []byte(strings.Repeat("cd", 32)), 0o600)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "object-store-secret-0123456789")
	t.Setenv("AWS_SESSION_TOKEN", "")
	k := &secretscan.Known{}
	BlobConfig{SigningKeyFile: keyFile}.addSecrets(k)
	var names []string
	for _, s := range k.Secrets() {
		names = append(names, s.Name)
	}
	joined := strings.Join(names, ";")
	if !strings.Contains(joined, "--signing-key-file") || !strings.Contains(joined, "AWS_SECRET_ACCESS_KEY") || len(names) != 2 {
		t.Errorf("known secrets %v: want the signing key file and the object store's secret key", names)
	}
}
