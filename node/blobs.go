package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/blob/disk"
	"github.com/airlockhq/airlock/blob/s3"
	"github.com/airlockhq/airlock/internal/secretscan"
)

// BlobConfig chooses where artifacts and sealed snapshots live, and the
// key that signs artifact URLs (which every node of a fleet must share).
type BlobConfig struct {
	// URL is empty for the state directory's blobs/, or an S3-compatible
	// bucket, s3://BUCKET?endpoint=URL&region=R&use_path_style=true.
	URL string
	// SigningKeyFile holds the key that signs artifact URLs (default:
	// signing.key in the state directory, made at first start).
	SigningKeyFile string
	// Dir is the local directory used without URL (default: the state
	// directory's blobs/).
	Dir string
}

// blobStore is an airlock.Blobs that airlockd closes on the way out.
type blobStore interface {
	airlock.Blobs
	Close() error
}

// open opens the configured blob store.
func (o BlobConfig) open(ctx context.Context, stateDir string, logger *slog.Logger) (blobStore, error) {
	if o.URL == "" {
		dir := o.Dir
		if dir == "" {
			dir = filepath.Join(stateDir, "blobs")
		}
		return disk.New(disk.Config{Dir: dir})
	}
	cfg := s3.Config{URL: o.URL}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("--blobs: %w", err)
	}
	b, err := s3.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("--blobs: %w", err)
	}
	logger.Info("blobs in object storage", "bucket", cfg.Redacted())
	if o.SigningKeyFile == "" {
		logger.Warn("--blobs is shared but --signing-key-file is not: artifact URLs this node signs work only on this node")
	}
	return b, nil
}

// signingKey reads the shared signing key, or the node's own (made at
// first start) when none is configured.
func (o BlobConfig) signingKey(stateDir string) ([]byte, error) {
	if o.SigningKeyFile == "" {
		return loadOrCreateKey(filepath.Join(stateDir, "signing.key"))
	}
	fi, err := os.Stat(o.SigningKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--signing-key-file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("--signing-key-file: %s is readable by others (mode %v): chmod 0600", o.SigningKeyFile, fi.Mode().Perm())
	}
	b, err := os.ReadFile(o.SigningKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--signing-key-file: %w", err)
	}
	b = []byte(strings.TrimRight(string(b), "\r\n"))
	if len(b) < 32 {
		return nil, fmt.Errorf("--signing-key-file: %s holds fewer than 32 bytes", o.SigningKeyFile)
	}
	return b, nil
}

// addSecrets makes the signing key file and the object store's secret
// key known secrets: nothing a sandbox is given may contain them.
func (o BlobConfig) addSecrets(k *secretscan.Known) {
	if o.SigningKeyFile != "" {
		k.AddFile("airlockd signing key (--signing-key-file)", o.SigningKeyFile)
	}
	if v := os.Getenv("AWS_SECRET_ACCESS_KEY"); v != "" {
		k.Add("object storage secret key (AWS_SECRET_ACCESS_KEY)", []byte(v))
	}
	if v := os.Getenv("AWS_SESSION_TOKEN"); v != "" {
		k.Add("object storage session token (AWS_SESSION_TOKEN)", []byte(v))
	}
}
