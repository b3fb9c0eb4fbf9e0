package session_test

import (
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// patternReader yields n pseudo-random bytes without holding them.
type patternReader struct {
	rng *rand.ChaCha8
	n   int64
}

func newPattern(seed byte, n int64) *patternReader {
	var s [32]byte
	s[0] = seed
	return &patternReader{rng: rand.NewChaCha8(s), n: n}
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.n {
		b = b[:p.n]
	}
	p.rng.Read(b)
	p.n -= int64(len(b))
	return len(b), nil
}

// A 200 MB upload streams into the session and back out unchanged; one
// larger than the disk fails cleanly with disk-full and leaves no partial
// file, not even over a file it would have replaced.
func TestLargeFiles(t *testing.T) {
	s := newStack(t, nil) // small sessions here have a 512 MiB disk
	sess := s.create(s.a, airlock.CreateSessionRequest{Image: "base"})
	ctx := ctxFor(t, 5*time.Minute)
	c := s.a.c
	const size = 200 << 20

	want := sha256.New()
	io.Copy(want, newPattern(1, size))
	start := time.Now()
	res, err := c.PutFile(ctx, sess.ID, "big/data.bin", newPattern(1, size), size)
	if err != nil || res.Size != size {
		t.Fatalf("200 MB upload: %+v %v", res, err)
	}
	t.Logf("200 MB up in %v", time.Since(start))
	if e := s.shell(s.a, sess.ID, "stat -c %s big/data.bin"); strings.TrimSpace(e.Stdout) != "209715200" {
		t.Fatalf("size in the sandbox: %+v", e)
	}
	got := sha256.New()
	start = time.Now()
	n, err := c.GetFile(ctx, sess.ID, "big/data.bin", got)
	if err != nil || n != size || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatalf("200 MB download: %d bytes, %v, same %v", n, err, bytes.Equal(got.Sum(nil), want.Sum(nil)))
	}
	t.Logf("200 MB down in %v", time.Since(start))

	// Too large for what is left of the disk; its size is not announced,
	// so the disk itself says no.
	if _, err := c.PutFile(ctx, sess.ID, "keep.txt", strings.NewReader("old"), 3); err != nil {
		t.Fatal(err)
	}
	_, err = c.PutFile(ctx, sess.ID, "keep.txt", newPattern(2, 400<<20), -1)
	wantProblem(t, "upload past the disk", err, 413, "disk-full")
	var out bytes.Buffer
	if _, err := c.GetFile(ctx, sess.ID, "keep.txt", &out); err != nil || out.String() != "old" {
		t.Fatalf("failed upload changed keep.txt: %q %v", out.String(), err)
	}
	e := s.shell(s.a, sess.ID, "ls -A /workspace /workspace/big; df -k /workspace | tail -1")
	if strings.Contains(e.Stdout, ".airlock-put") || e.ExitCode != 0 {
		t.Fatalf("a partial upload was left: %s", e.Stdout)
	}
	// The space came back: the session can write again.
	if _, err := c.PutFile(ctx, sess.ID, "after.txt", strings.NewReader("ok"), 2); err != nil {
		t.Fatalf("upload after a full disk: %v", err)
	}
	if err := c.DeleteFile(ctx, sess.ID, "big/data.bin"); err != nil {
		t.Fatal(err)
	}
	err = c.DeleteFile(ctx, sess.ID, "big/data.bin")
	wantProblem(t, "delete twice", err, 404, "file-not-found")
}

// Paths stay inside the workspace (and /tmp): symlinks and hard links
// the session's own code makes are refused, not followed.
func TestFilePathConfinement(t *testing.T) {
	s := newStack(t, nil)
	sess := s.create(s.a, airlock.CreateSessionRequest{Image: "base"})
	ctx := ctxFor(t, 2*time.Minute)
	c := s.a.c
	e := s.shell(s.a, sess.ID, `set -e
echo inside > real.txt
ln -s /etc/passwd passwd
ln -s /etc etc
ln -s real.txt alias
mkdir -p d && echo t > linked.txt && ln linked.txt d/hard && echo plain > /tmp/t.txt
ln -s / root`)
	if e.ExitCode != 0 {
		t.Fatalf("setup: %+v", e)
	}
	for _, p := range []string{"passwd", "etc/passwd", "alias", "root/etc/passwd", "d/hard", "linked.txt", "/workspace/etc/hostname"} {
		var out bytes.Buffer
		_, err := c.GetFile(ctx, sess.ID, p, &out)
		if err == nil || out.Len() > 0 {
			t.Errorf("GET %s: %q, %v", p, out.String(), err)
			continue
		}
		wantProblem(t, "GET "+p, err, 403, "path-refused")
	}
	for _, p := range []string{"etc/x", "root/tmp/x", "passwd"} {
		_, err := c.PutFile(ctx, sess.ID, p, strings.NewReader("pwned"), 5)
		wantProblem(t, "PUT "+p, err, 403, "path-refused")
	}
	if _, err := c.ListFiles(ctx, sess.ID, "etc"); err == nil {
		t.Error("listed through a symlink")
	}
	if e := s.shell(s.a, sess.ID, "cat /etc/hostname; ls /tmp"); strings.Contains(e.Stdout, "pwned") || strings.Contains(e.Stdout, " x") {
		t.Fatalf("a refused put wrote: %s", e.Stdout)
	}
	// /tmp is reachable by absolute path; the listing says what is what.
	var out bytes.Buffer
	if _, err := c.GetFile(ctx, sess.ID, "/tmp/t.txt", &out); err != nil || out.String() != "plain\n" {
		t.Errorf("GET /tmp/t.txt: %q %v", out.String(), err)
	}
	l, err := c.ListFiles(ctx, sess.ID, "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, f := range l.Entries {
		types[f.Name] = f.Type
	}
	if types["real.txt"] != "file" || types["passwd"] != "symlink" || types["d"] != "dir" {
		t.Fatalf("listing: %+v", l.Entries)
	}
}

// The session's own code swaps a directory for a symlink to / over and
// over while files are read and written through it: no request ever
// reaches outside the workspace (the check-then-use race).
func TestFileSymlinkSwapRace(t *testing.T) {
	s := newStack(t, nil)
	sess := s.create(s.a, airlock.CreateSessionRequest{Image: "base"})
	ctx := ctxFor(t, 2*time.Minute)
	c := s.a.c
	s.shell(s.a, sess.ID, "mkdir -p d/etc d/tmp && echo inside > d/etc/passwd")
	swapper := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, sess.ID, airlock.SessionExecRequest{TimeoutSec: 4, Shell: `
while true; do mv d d.real; ln -s / d; rm d; mv d.real d; done`})
		swapper <- err
	}()
	deadline := time.Now().Add(3 * time.Second)
	var reads, writes, refused int
	for time.Now().Before(deadline) {
		var out bytes.Buffer
		_, err := c.GetFile(ctx, sess.ID, "d/etc/passwd", &out)
		switch {
		case err == nil && out.String() != "inside\n":
			t.Fatalf("read outside the workspace: %q", out.String())
		case err == nil:
			reads++
		default:
			refused++
		}
		if _, err := c.PutFile(ctx, sess.ID, "d/tmp/x", strings.NewReader("pwned"), 5); err == nil {
			writes++
		}
	}
	if err := <-swapper; err != nil {
		t.Fatal(err)
	}
	if e := s.shell(s.a, sess.ID, "cat /tmp/x 2>&1; ls d.real 2>&1"); strings.Contains(e.Stdout, "pwned") {
		t.Fatalf("a write reached /tmp/x: %s", e.Stdout)
	}
	t.Logf("%d reads and %d writes went through, %d refused", reads, writes, refused)
	if reads == 0 || refused == 0 {
		t.Logf("the race was not exercised both ways (reads %d, refused %d)", reads, refused)
	}
}
