package agent_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// A hard link to a file elsewhere on the disk is refused, like a symlink.
func TestGetRefusesHardLinks(t *testing.T) {
	h := start(t)
	outside := filepath.Join(filepath.Dir(h.ws), "outside-"+filepath.Base(h.ws))
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(outside)
	if err := os.Link(outside, filepath.Join(h.ws, "hl")); err != nil {
		testreq.Skipf(t, "skipped: cannot make a hard link in the test's temporary directory: %v", err)
	}
	got, err := h.get("hl", 1<<20)
	if code := remoteCode(t, err); code != "refused" || len(got) != 0 {
		t.Fatalf("Get of a hard link: %q, %s", got, code)
	}
}

// A directory swapped for a symlink to the outside while requests run
// (the check-then-use race a program in the sandbox could play) never
// lets a request read or write outside the workspace.
func TestFilesSymlinkSwapRace(t *testing.T) {
	h := start(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "f"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, real := filepath.Join(h.ws, "d"), filepath.Join(h.ws, "d.real")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "f"), []byte("inside, longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			os.Rename(d, real)
			os.Symlink(outside, d)
			// Part of the race played: keep the symlink in place a moment.
			time.Sleep(time.Microsecond)
			os.Remove(d)
			os.Rename(real, d)
			swaps.Add(1)
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	var gets, puts int
	for time.Now().Before(deadline) {
		var buf bytes.Buffer
		if _, err := h.c.Get(h.ctx(5*time.Second), "d/f", &buf, 1<<20); err == nil {
			gets++
			if buf.String() != "inside, longer" {
				t.Fatalf("Get d/f read %q", buf.String())
			}
		}
		// Puts in the second half only: one that finds d missing makes it
		// anew, which ends the swapping.
		if time.Until(deadline) < time.Second {
			if _, err := h.c.Put(h.ctx(5*time.Second), "d/g", 0, bytes.NewReader([]byte("pwned"))); err == nil {
				puts++
			}
		}
		if entries, _, err := h.c.List(h.ctx(5*time.Second), "d"); err == nil {
			for _, e := range entries {
				if e.Name == "f" && e.Size == int64(len("SECRET")) {
					t.Fatal("List d listed the outside directory")
				}
			}
		}
	}
	close(stop)
	wg.Wait()
	if _, err := os.Lstat(filepath.Join(outside, "g")); err == nil {
		t.Fatal("a put reached the outside directory")
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "f")); string(b) != "SECRET" {
		t.Fatalf("outside file changed: %q", b)
	}
	t.Logf("%d swaps, %d gets and %d puts got through", swaps.Load(), gets, puts)
	noTempFiles(t, h.ws)
	noTempFiles(t, outside)
	h.healthy()
}
