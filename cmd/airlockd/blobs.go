package main

import (
	"context"
	"flag"
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

// blobOptions choose where artifacts and sealed snapshots live, and the
// key that signs artifact URLs (which every node of a fleet must share).
type blobOptions struct {
	url            string
	signingKeyFile string
}

func (o *blobOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.url, "blobs", envOr("AIRLOCK_BLOBS", ""),
		"where artifacts and sealed snapshots are stored: empty for the state directory's blobs/, or an S3-compatible bucket "+
			"s3://BUCKET?endpoint=URL&region=R&use_path_style=true[&prefix=DIR/] (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "+
			"never in the URL; the bucket must exist) (env AIRLOCK_BLOBS)")
	fs.StringVar(&o.signingKeyFile, "signing-key-file", envOr("AIRLOCK_SIGNING_KEY_FILE", ""),
		"file holding the key that signs artifact URLs (at least 32 bytes, mode 0600); every node of a fleet must be given the same one "+
			"so a URL signed by one node works on all (default: signing.key in the state directory, made at first start) (env AIRLOCK_SIGNING_KEY_FILE)")
}

// blobStore is an airlock.Blobs that airlockd closes on the way out.
type blobStore interface {
	airlock.Blobs
	Close() error
}

// open opens the configured blob store.
func (o blobOptions) open(ctx context.Context, stateDir string, logger *slog.Logger) (blobStore, error) {
	if o.url == "" {
		return disk.New(disk.Config{Dir: filepath.Join(stateDir, "blobs")})
	}
	cfg := s3.Config{URL: o.url}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("--blobs: %w", err)
	}
	b, err := s3.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("--blobs: %w", err)
	}
	logger.Info("blobs in object storage", "bucket", cfg.Redacted())
	if o.signingKeyFile == "" {
		logger.Warn("--blobs is shared but --signing-key-file is not: artifact URLs this node signs work only on this node")
	}
	return b, nil
}

// signingKey reads the shared signing key, or the node's own (made at
// first start) when none is configured.
func (o blobOptions) signingKey(stateDir string) ([]byte, error) {
	if o.signingKeyFile == "" {
		return loadOrCreateKey(filepath.Join(stateDir, "signing.key"))
	}
	fi, err := os.Stat(o.signingKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--signing-key-file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("--signing-key-file: %s is readable by others (mode %v): chmod 0600", o.signingKeyFile, fi.Mode().Perm())
	}
	b, err := os.ReadFile(o.signingKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--signing-key-file: %w", err)
	}
	b = []byte(strings.TrimRight(string(b), "\r\n"))
	if len(b) < 32 {
		return nil, fmt.Errorf("--signing-key-file: %s holds fewer than 32 bytes", o.signingKeyFile)
	}
	return b, nil
}

// addSecrets makes the signing key file and the object store's secret
// key known secrets: nothing a sandbox is given may contain them.
func (o blobOptions) addSecrets(k *secretscan.Known) {
	if o.signingKeyFile != "" {
		k.AddFile("airlockd signing key (--signing-key-file)", o.signingKeyFile)
	}
	if v := os.Getenv("AWS_SECRET_ACCESS_KEY"); v != "" {
		k.Add("object storage secret key (AWS_SECRET_ACCESS_KEY)", []byte(v))
	}
	if v := os.Getenv("AWS_SESSION_TOKEN"); v != "" {
		k.Add("object storage session token (AWS_SESSION_TOKEN)", []byte(v))
	}
}
