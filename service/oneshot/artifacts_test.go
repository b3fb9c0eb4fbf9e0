package oneshot

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// memBlobs keeps artifact bytes in memory and can run a hook before each
// Put, to change the workspace while collection is under way.
type memBlobs struct {
	mu      sync.Mutex
	data    map[string][]byte
	puts    int
	onPut   func(n int)
	content [][]byte // every Put's bytes, in order
}

var _ airlock.Blobs = (*memBlobs)(nil)

func (b *memBlobs) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	b.mu.Lock()
	b.puts++
	n, hook := b.puts, b.onPut
	b.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.data == nil {
		b.data = map[string][]byte{}
	}
	b.data[key] = data
	b.content = append(b.content, data)
	return int64(len(data)), nil
}

func (b *memBlobs) Open(ctx context.Context, key string) (io.ReadSeekCloser, int64, error) {
	return nil, 0, fmt.Errorf("not used")
}

func (b *memBlobs) Delete(ctx context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.data, key)
	return nil
}

func (b *memBlobs) stored() [][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]byte(nil), b.content...)
}

// secret is the content of every host file outside the workspace.
const secret = "HOST-SECRET-must-never-be-collected"

func testManager(t *testing.T, blobs airlock.Blobs) *Manager {
	t.Helper()
	return &Manager{cfg: Config{
		Blobs:             blobs,
		MaxArtifacts:      64,
		MaxArtifactBytes:  1 << 20,
		MaxArtifactsTotal: 4 << 20,
		NewID:             airlock.NewID,
	}}
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// hostDir makes a directory outside the workspace standing for the host:
// secret.txt, only-outside.txt and sub/secret.txt, all holding secret.
func hostDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range []string{"secret.txt", "only-outside.txt", "sub/secret.txt", "sub/f.txt", "f.txt"} {
		writeFile(t, filepath.Join(dir, n), secret)
	}
	return dir
}

func collectAll(t *testing.T, m *Manager, ws string) ([]airlock.Artifact, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	arts, truncated, err := m.collect(ctx, &airlock.Execution{ID: "e", TenantID: "t"}, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	return arts, truncated
}

func checkNoSecret(t *testing.T, blobs *memBlobs) {
	t.Helper()
	for _, b := range blobs.stored() {
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("collection read a file outside the workspace: stored %q", b)
		}
	}
}

// Symlinks (to host files, to host directories, relative ones climbing
// out), FIFOs and devices in the workspace are never collected, and a FIFO
// never blocks collection.
func TestCollectSkipsLinksAndSpecialFiles(t *testing.T) {
	host := hostDir(t)
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "out.txt"), "made by the code")
	writeFile(t, filepath.Join(ws, "d/inner.txt"), "inner")
	links := map[string]string{
		"host-file":     filepath.Join(host, "secret.txt"),
		"host-dir":      host,
		"d/climb":       "../../" + filepath.Base(host) + "/secret.txt",
		"d/climb-dir":   "../../" + filepath.Base(host),
		"self":          ".",
		"dangling":      "/nonexistent/airlock-test",
		"d/to-out.txt":  "../out.txt",
		"d/hostpasswd":  "/etc/passwd",
		"d/proc-secret": "/proc/self/environ",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := syscall.Mknod(filepath.Join(ws, "d/null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Fatal(err)
		}
	}

	blobs := &memBlobs{}
	arts, _ := collectAll(t, testManager(t, blobs), ws)
	var got []string
	for _, a := range arts {
		got = append(got, a.Filename)
	}
	if want := "d/inner.txt,out.txt"; strings.Join(got, ",") != want {
		t.Fatalf("collected %v, want %s", got, want)
	}
	checkNoSecret(t, blobs)
}

// swapForLink moves the directory ws/name out of the workspace (to park)
// and puts in its place a symlink to target.
func swapForLink(t *testing.T, ws, name, park, target string) {
	t.Helper()
	if err := os.Rename(filepath.Join(ws, name), park); err != nil {
		t.Error(err)
		return
	}
	if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
		t.Error(err)
	}
}

// A directory of the workspace swapped for a symlink to a host directory
// while the walk is inside it: the walk goes on in the directory it opened
// and never lists, stats or reports anything of the host directory.
func TestWalkDirectorySwappedForSymlink(t *testing.T) {
	host := hostDir(t)
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "a/1.txt"), "one")
	writeFile(t, filepath.Join(ws, "a/sub/2.txt"), "two")
	writeFile(t, filepath.Join(ws, "z.txt"), "zed")
	park := filepath.Join(t.TempDir(), "parked")

	var got []string
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	walk(root, func(rel string, fi fs.FileInfo) bool {
		got = append(got, rel)
		if rel == "a/1.txt" {
			swapForLink(t, ws, "a", park, host)
		}
		return true
	})
	for _, rel := range got {
		if strings.Contains(rel, "secret") || strings.Contains(rel, "only-outside") {
			t.Fatalf("the walk followed the swapped-in symlink to the host: reported %q (all: %v)", rel, got)
		}
	}
	if want := "a/1.txt,a/sub/2.txt,z.txt"; strings.Join(got, ",") != want {
		t.Fatalf("walk reported %v, want %s", got, want)
	}
}

// The same swap during collection (between two files being stored): no
// host file is stored and every artifact is a file that was in the
// workspace.
func TestCollectDirectorySwappedForSymlink(t *testing.T) {
	host := hostDir(t)
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "a/1.txt"), "one")
	writeFile(t, filepath.Join(ws, "a/secret.txt"), "inside")
	writeFile(t, filepath.Join(ws, "a/sub/secret.txt"), "inside")
	park := filepath.Join(t.TempDir(), "parked")

	blobs := &memBlobs{}
	blobs.onPut = func(n int) {
		if n == 1 {
			swapForLink(t, ws, "a", park, host)
		}
	}
	arts, _ := collectAll(t, testManager(t, blobs), ws)
	checkNoSecret(t, blobs)
	for _, a := range arts {
		if a.Filename != "a/1.txt" {
			t.Errorf("collected %q through the swapped-in symlink", a.Filename)
		}
	}
}

// A directory flipping between itself and a symlink to the host while
// collection runs again and again (the race a check-then-open by path
// loses): no host file is ever stored or reported.
func TestCollectRacingSwaps(t *testing.T) {
	host := hostDir(t)
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "d/f.txt"), "inside")
	writeFile(t, filepath.Join(ws, "d/sub/f.txt"), "inside")
	park := t.TempDir()
	parkedDir := filepath.Join(park, "dir")
	parkedLink := filepath.Join(park, "link")
	if err := os.Symlink(host, parkedLink); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(ws, "d")

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		isDir := true
		for {
			select {
			case <-stop:
				if !isDir {
					os.Rename(d, parkedLink)
					os.Rename(parkedDir, d)
				}
				return
			default:
			}
			if isDir {
				os.Rename(d, parkedDir)
				os.Rename(parkedLink, d)
			} else {
				os.Rename(d, parkedLink)
				os.Rename(parkedDir, d)
			}
			isDir = !isDir
		}
	}()
	defer func() {
		close(stop)
		<-done
	}()

	blobs := &memBlobs{}
	m := testManager(t, blobs)
	deadline := time.Now().Add(3 * time.Second)
	rounds := 0
	for time.Now().Before(deadline) || rounds < 200 {
		rounds++
		arts, _ := collectAll(t, m, ws)
		for _, a := range arts {
			if strings.Contains(a.Filename, "secret") || strings.Contains(a.Filename, "only-outside") {
				t.Fatalf("round %d: collected host file %q", rounds, a.Filename)
			}
		}
		checkNoSecret(t, blobs)
		root, err := os.OpenRoot(ws)
		if err != nil {
			t.Fatal(err)
		}
		walk(root, func(rel string, fi fs.FileInfo) bool {
			if strings.Contains(rel, "secret") || strings.Contains(rel, "only-outside") {
				t.Fatalf("round %d: the walk reported host file %q", rounds, rel)
			}
			return true
		})
		root.Close()
	}
	t.Logf("%d rounds", rounds)
}
