package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/blob/disk"
)

var _ airlock.Blobs = (*Bucket)(nil)

// prefixParam is the query parameter of a bucket URL that names a key
// prefix inside the bucket; the other parameters go to the S3 driver.
const prefixParam = "prefix"

// Config configures Open.
type Config struct {
	// URL names the bucket: s3://BUCKET?endpoint=URL&region=R&use_path_style=true
	// and the other parameters of gocloud.dev's s3blob URL opener, plus
	// prefix=DIR/ to keep every key under DIR/. It must not carry
	// credentials.
	URL string
}

// Validate reports whether c can be used.
func (c Config) Validate() error {
	_, _, err := c.parse()
	return err
}

// parse splits the URL into the driver's URL (without prefix) and the
// key prefix.
func (c Config) parse() (*url.URL, string, error) {
	bad := func(format string, args ...any) error {
		return airlock.Problem(airlock.EINVALID, "invalid-blob-url", "s3blobs: "+format, args...)
	}
	if c.URL == "" {
		return nil, "", bad("bucket URL is required")
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, "", bad("bucket URL does not parse") // the error may quote the URL
	}
	switch {
	case u.Scheme != s3blob.Scheme:
		return nil, "", bad("bucket URL must start with %s://", s3blob.Scheme)
	case u.User != nil:
		return nil, "", bad("bucket URL must not carry credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	case u.Host == "":
		return nil, "", bad("bucket URL names no bucket")
	case u.Path != "" && u.Path != "/":
		return nil, "", bad("bucket URL must have no path: use ?prefix=DIR/ for keys under a prefix")
	}
	q := u.Query()
	prefix := q.Get(prefixParam)
	q.Del(prefixParam)
	if prefix != "" {
		if !strings.HasSuffix(prefix, "/") {
			return nil, "", bad("prefix must end in /")
		}
		if err := disk.ValidateKey(strings.TrimSuffix(prefix, "/")); err != nil {
			return nil, "", bad("prefix: %v", err)
		}
	}
	u.RawQuery = q.Encode()
	u.Path = ""
	return u, prefix, nil
}

// Redacted returns the bucket URL for logs: the bucket and its endpoint,
// without the other parameters.
func (c Config) Redacted() string {
	u, prefix, err := c.parse()
	if err != nil {
		return "s3://(invalid)"
	}
	s := s3blob.Scheme + "://" + u.Host
	if ep := u.Query().Get("endpoint"); ep != "" {
		if e, err := url.Parse(ep); err == nil {
			s += " at " + e.Scheme + "://" + e.Host
		}
	}
	if prefix != "" {
		s += " under " + prefix
	}
	return s
}

// Bucket stores blobs as objects of one S3 bucket.
type Bucket struct {
	b *blob.Bucket
}

// Open opens the bucket and checks that it can be reached; the bucket must
// exist. Credentials come from the environment (see the package doc).
func Open(ctx context.Context, cfg Config) (*Bucket, error) {
	u, prefix, err := cfg.parse()
	if err != nil {
		return nil, err
	}
	b, err := blob.DefaultURLMux().OpenBucketURL(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("s3blobs: open %s: %s", cfg.Redacted(), cleanErr(err))
	}
	if prefix != "" {
		b = blob.PrefixedBucket(b, prefix)
	}
	ok, err := b.IsAccessible(ctx)
	if err == nil && !ok {
		err = errors.New("the bucket does not exist")
	}
	if err != nil {
		b.Close()
		return nil, airlock.Errorf(airlock.EUNAVAILABLE, "s3blobs: %s is not usable: %s", cfg.Redacted(), cleanErr(err))
	}
	return &Bucket{b: b}, nil
}

// Close releases the bucket. Methods called after Close fail.
func (s *Bucket) Close() error { return s.b.Close() }

// Put stores the bytes of r under key, replacing any object there, and
// returns how many it wrote. On any error (r's, ctx's or the server's) the
// upload is aborted and the object is left as it was.
func (s *Bucket) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	if err := disk.ValidateKey(key); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// Cancelling the writer's context before Close is how gocloud aborts
	// an upload.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.b.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return 0, fmt.Errorf("s3blobs: put %s: %w", key, err)
	}
	n, err := io.Copy(w, r)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		cancel()
		w.Close()
		return 0, fmt.Errorf("s3blobs: put %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("s3blobs: put %s: %w", key, err)
	}
	return n, nil
}

// Open returns the object stored under key and its size; the reader seeks
// by asking for a range. ctx must last as long as the reader is used. A
// missing object is ErrNotFound.
func (s *Bucket) Open(ctx context.Context, key string) (io.ReadSeekCloser, int64, error) {
	if err := disk.ValidateKey(key); err != nil {
		return nil, 0, err
	}
	r, err := s.b.NewReader(ctx, key, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, 0, fmt.Errorf("blob %s: %w", key, airlock.ErrNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("s3blobs: open %s: %w", key, err)
	}
	return r, r.Size(), nil
}

// Delete removes the object stored under key. A missing object is not an
// error.
func (s *Bucket) Delete(ctx context.Context, key string) error {
	if err := disk.ValidateKey(key); err != nil {
		return err
	}
	err := s.b.Delete(ctx, key)
	if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("s3blobs: delete %s: %w", key, err)
	}
	return nil
}

// cleanErr is an error's text for a message that is not wrapped; the
// driver's errors can be long, the first line says what happened.
func cleanErr(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
