package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/blob/s3"
	"github.com/airlockhq/airlock/internal/testenv/s3test"
)

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		url string
		ok  bool
	}{
		{"s3://bucket", true},
		{"s3://bucket?endpoint=http://127.0.0.1:8333&region=us-east-1&use_path_style=true", true},
		{"s3://bucket?prefix=airlock/", true},
		{"s3://bucket/", true},
		{"", false},
		{"file:///tmp/x", false},
		{"s3://", false},
		{"s3://key:secret@bucket", false},
		{"s3://bucket/path", false},
		{"s3://bucket?prefix=noslash", false},
		{"s3://bucket?prefix=../", false},
		{"s3://bucket?prefix=/", false},
		{"s3://%zz", false},
	} {
		if err := (s3.Config{URL: tt.url}).Validate(); (err == nil) != tt.ok {
			t.Errorf("Validate(%q) = %v, want ok=%v", tt.url, err, tt.ok)
		} else if err != nil && airlock.ErrorCode(err) != airlock.EINVALID {
			t.Errorf("Validate(%q): code %s, want %s", tt.url, airlock.ErrorCode(err), airlock.EINVALID)
		}
	}
}

func TestRedactedShowsNoQuery(t *testing.T) {
	got := s3.Config{URL: "s3://b?endpoint=http://127.0.0.1:1/x?y&region=r&profile=secretish&prefix=p/"}.Redacted()
	if got != "s3://b at http://127.0.0.1:1 under p/" {
		t.Errorf("Redacted = %q", got)
	}
}

func open(t *testing.T, srv *s3test.Server, extra ...string) *s3.Bucket {
	t.Helper()
	b, err := s3.Open(context.Background(), s3.Config{URL: srv.BucketURL(extra...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestBucket runs every case against one versitygw server, started once
// for all of them.
func TestBucket(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	ctx := context.Background()
	b := open(t, srv)

	t.Run("round trip", func(t *testing.T) {
		for _, tt := range []struct {
			key  string
			data []byte
		}{
			{"empty", nil},
			{"t1/e1/out.txt", []byte("hello\n")},
			{"t1/e1/.hidden", []byte("dot file")},
			{"t1/e2/big.bin", bytes.Repeat([]byte{0, 1, 2, 3, 255}, 300_000)},
		} {
			n, err := b.Put(ctx, tt.key, bytes.NewReader(tt.data))
			if err != nil || n != int64(len(tt.data)) {
				t.Fatalf("Put(%s) = %d, %v; want %d", tt.key, n, err, len(tt.data))
			}
			rc, size, err := b.Open(ctx, tt.key)
			if err != nil {
				t.Fatalf("Open(%s): %v", tt.key, err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || size != int64(len(tt.data)) || !bytes.Equal(got, tt.data) {
				t.Fatalf("%s: read back %d bytes (size %d, err %v), want %d", tt.key, len(got), size, err, len(tt.data))
			}
		}
	})

	t.Run("overwrite and seek", func(t *testing.T) {
		if _, err := b.Put(ctx, "t1/e1/out.txt", strings.NewReader("replaced")); err != nil {
			t.Fatal(err)
		}
		rc, size, err := b.Open(ctx, "t1/e1/out.txt")
		if err != nil || size != 8 {
			t.Fatalf("Open after overwrite: size %d, %v", size, err)
		}
		defer rc.Close()
		for _, st := range []struct {
			off    int64
			whence int
			pos    int64
			want   string
		}{
			{4, io.SeekStart, 4, "aced"},
			{-3, io.SeekEnd, 5, "ced"},
			{0, io.SeekStart, 0, "replaced"},
		} {
			pos, err := rc.Seek(st.off, st.whence)
			if err != nil || pos != st.pos {
				t.Fatalf("Seek(%d, %d) = %d, %v; want %d", st.off, st.whence, pos, err, st.pos)
			}
			if got, _ := io.ReadAll(rc); string(got) != st.want {
				t.Errorf("after Seek(%d, %d) read %q, want %q", st.off, st.whence, got, st.want)
			}
		}
	})

	t.Run("missing and deleted", func(t *testing.T) {
		_, _, err := b.Open(ctx, "never/was")
		if !errors.Is(err, airlock.ErrNotFound) || airlock.ErrorCode(err) != airlock.ENOTFOUND {
			t.Errorf("Open of a missing key: %v, want not found", err)
		}
		for i := range 2 {
			if err := b.Delete(ctx, "t1/e1/out.txt"); err != nil {
				t.Fatalf("Delete #%d: %v", i+1, err)
			}
		}
		if _, _, err := b.Open(ctx, "t1/e1/out.txt"); !errors.Is(err, airlock.ErrNotFound) {
			t.Errorf("Open after Delete: %v, want not found", err)
		}
		if err := b.Delete(ctx, "never/was"); err != nil {
			t.Errorf("Delete of a missing key: %v", err)
		}
	})

	t.Run("invalid keys", func(t *testing.T) {
		for _, key := range []string{"", "/abs", "a/../b", "a//b", "sp ace", strings.Repeat("k", 513)} {
			if _, err := b.Put(ctx, key, strings.NewReader("x")); airlock.ErrorCode(err) != airlock.EINVALID {
				t.Errorf("Put(%q): %v, want invalid", key, err)
			}
			if _, _, err := b.Open(ctx, key); airlock.ErrorCode(err) != airlock.EINVALID {
				t.Errorf("Open(%q): %v, want invalid", key, err)
			}
			if err := b.Delete(ctx, key); airlock.ErrorCode(err) != airlock.EINVALID {
				t.Errorf("Delete(%q): %v, want invalid", key, err)
			}
		}
	})

	t.Run("failed put leaves the old object", func(t *testing.T) {
		if _, err := b.Put(ctx, "keep/me", strings.NewReader("old")); err != nil {
			t.Fatal(err)
		}
		bad := io.MultiReader(strings.NewReader(strings.Repeat("new", 1000)), errReader{})
		if _, err := b.Put(ctx, "keep/me", bad); err == nil {
			t.Fatal("Put with a failing reader succeeded")
		}
		if _, err := b.Put(ctx, "fresh/never", io.MultiReader(strings.NewReader("x"), errReader{})); err == nil {
			t.Fatal("Put with a failing reader succeeded")
		}
		if got := read(t, b, "keep/me"); got != "old" {
			t.Errorf("after a failed Put: %q, want %q", got, "old")
		}
		if _, _, err := b.Open(ctx, "fresh/never"); !errors.Is(err, airlock.ErrNotFound) {
			t.Errorf("a failed Put of a new key left an object: %v", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := b.Put(cctx, "cancelled", strings.NewReader("x")); err == nil {
			t.Error("Put with a cancelled context succeeded")
		}
	})

	t.Run("open fails", func(t *testing.T) { testOpenFails(t, srv) })

	t.Run("prefix", func(t *testing.T) {
		p := open(t, srv, "prefix=tenant-a/")
		if _, err := p.Put(ctx, "x/y", strings.NewReader("under a prefix")); err != nil {
			t.Fatal(err)
		}
		// The object is at tenant-a/x/y in the bucket, seen with a plain client.
		out, err := srv.Client().GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String("tenant-a/x/y")})
		if err != nil {
			t.Fatalf("the prefixed object is not at tenant-a/x/y: %v", err)
		}
		out.Body.Close()
		if got := read(t, p, "x/y"); got != "under a prefix" {
			t.Errorf("read %q", got)
		}
		if _, _, err := b.Open(ctx, "x/y"); !errors.Is(err, airlock.ErrNotFound) {
			t.Errorf("unprefixed bucket sees x/y: %v", err)
		}
	})
}

func testOpenFails(t *testing.T, srv *s3test.Server) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		url  string
		code string
	}{
		{"missing bucket", strings.Replace(srv.BucketURL(), "s3://"+srv.Bucket, "s3://no-such-bucket", 1), airlock.EUNAVAILABLE},
		{"unknown parameter", srv.BucketURL("bogus=1"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := s3.Open(ctx, s3.Config{URL: tt.url})
			if err == nil {
				b.Close()
				t.Fatal("Open succeeded")
			}
			if tt.code != "" && airlock.ErrorCode(err) != tt.code {
				t.Errorf("code %s, want %s (%v)", airlock.ErrorCode(err), tt.code, err)
			}
			if strings.Contains(err.Error(), srv.SecretKey) {
				t.Errorf("error shows the secret key: %v", err)
			}
		})
	}
	t.Run("wrong secret", func(t *testing.T) {
		t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong"+srv.SecretKey)
		b, err := s3.Open(ctx, s3.Config{URL: srv.BucketURL()})
		if err == nil {
			b.Close()
			t.Fatal("Open with a wrong secret succeeded")
		}
		if strings.Contains(err.Error(), srv.SecretKey) {
			t.Errorf("error shows the secret key: %v", err)
		}
	})
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("reader broke") }

func read(t *testing.T, b *s3.Bucket, key string) string {
	t.Helper()
	rc, _, err := b.Open(context.Background(), key)
	if err != nil {
		t.Fatalf("Open(%s): %v", key, err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(got)
}
