package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/agent/protocol"
)

var fileCases = []Case{
	{Group: Files, Name: "symlinks-to-host",
		Want: "symlinks the sandbox makes to host paths stay symlinks on the host: the agent refuses to read through them, a host reader that never follows links finds no file of the host among the workspace's regular files, and the canary never comes back",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			p, token := e.Canary()
			r := e.Sh(sb, fmt.Sprintf(`cd /workspace && ln -s %q canary && ln -s /etc/shadow shadow && ln -s ../../../../../../.. up && ln -s /proc/1/root root1 && mkdir d && ln -s %q d/c && echo ok`, p, filepath.Dir(p)))
			if r.Stdout != "ok\n" {
				t.Fatalf("make links: %s", r)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, name := range []string{"canary", "shadow", "up/etc/passwd", "root1/etc/hostname", "d/c/secret", "/workspace/up" + p} {
				var buf bytes.Buffer
				if _, err := sb.Agent().Get(ctx, name, &buf, 1<<20); err == nil {
					t.Errorf("the agent read %s through a symlink: %q", name, cutText(buf.String(), 200))
				}
				if strings.Contains(buf.String(), token) {
					t.Fatalf("the agent returned the host canary through %s", name)
				}
			}
			if err := sb.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			files := collect(t, sb.WorkspaceDir())
			for name, content := range files {
				if strings.Contains(content, token) || strings.Contains(content, "root:") {
					t.Errorf("a host file came back as workspace file %s", name)
				}
			}
			for _, name := range []string{"canary", "shadow", "up", "root1", "d/c"} {
				fi, err := os.Lstat(filepath.Join(sb.WorkspaceDir(), name))
				if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
					t.Errorf("%s is not a symlink on the host: %v %v", name, fi, err)
				}
			}
		}},
	{Group: Files, Name: "hard-links",
		Want: "a hard link to a file outside the workspace cannot be made (it is a file system of its own); every file the host sees in it lives on that file system; the agent refuses to read a hard-linked file",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
tryop("passwd", lambda: os.link("/etc/passwd", "/workspace/pw"))
tryop("bin", lambda: os.link("/bin/true", "/workspace/t"))
open("/workspace/a", "w").write("a")
tryop("inside", lambda: os.link("/workspace/a", "/workspace/b"))
`)
			requireRan(t, r)
			e.expectProbes(r, []string{"EXDEV", "EPERM", "EACCES"}, "passwd", "bin")
			e.expectProbes(r, []string{"ok"}, "inside")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := sb.Agent().Get(ctx, "b", io.Discard, 1<<20); err == nil {
				t.Errorf("the agent read a hard-linked file")
			}
			if err := sb.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			var root unix.Stat_t
			if err := unix.Stat(sb.WorkspaceDir(), &root); err != nil {
				t.Fatal(err)
			}
			filepath.WalkDir(sb.WorkspaceDir(), func(path string, d fs.DirEntry, err error) error {
				var st unix.Stat_t
				if err == nil && unix.Lstat(path, &st) == nil && st.Dev != root.Dev {
					t.Errorf("%s is on another file system than the workspace", path)
				}
				return nil
			})
		}},
	{Group: Files, Name: "odd-names",
		Want: "names with newlines, tabs, leading dashes, dots, non-ASCII and 255 bytes, and paths deeper than PATH_MAX, come back to the host exactly, beneath the workspace; the agent lists them with valid entries and reads them",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			names := []string{"new\nline", "tab\there", "-rf", "...", "..\n", " space ", "日本語.txt", "back\\slash", "quote\"'", strings.Repeat("n", 255)}
			var script strings.Builder
			script.WriteString("import os\nos.chdir('/workspace')\n")
			for _, n := range names {
				fmt.Fprintf(&script, "open(%q, 'w').write(%q)\n", n, "content of "+n)
			}
			script.WriteString("d = '/workspace/deep'\nos.mkdir(d)\nos.chdir(d)\nfor i in range(30):\n    os.mkdir('d' * 200)\n    os.chdir('d' * 200)\nopen('bottom', 'w').write('deep')\nprint('ok')\n")
			r := e.Exec(sb, protocol.ExecRequest{Argv: []string{"python3", "-c", script.String()}})
			if r.Stdout != "ok\n" {
				t.Fatalf("make names: %s", r)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			entries, _, err := sb.Agent().List(ctx, "/workspace")
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			listed := map[string]bool{}
			for _, en := range entries {
				listed[en.Name] = true
			}
			for _, n := range names {
				if !listed[n] {
					t.Errorf("the agent did not list %q", n)
				}
				var buf bytes.Buffer
				if _, err := sb.Agent().Get(ctx, n, &buf, 1<<20); err != nil || buf.String() != "content of "+n {
					t.Errorf("get %q: %q %v", n, buf.String(), err)
				}
			}
			if err := sb.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			files := collect(t, sb.WorkspaceDir())
			for _, n := range names {
				if files[n] != "content of "+n {
					t.Errorf("the host reads %q as %q", n, cutText(files[n], 100))
				}
			}
			deep := 0
			for name, content := range files {
				if strings.HasPrefix(name, "deep/") && content == "deep" {
					deep++
				}
			}
			if deep != 1 {
				t.Errorf("the host did not find the file below a path longer than PATH_MAX")
			}
		}},
	{Group: Files, Name: "dotdot-and-absolute-paths",
		Want: "file requests with .. or absolute paths outside /workspace and /tmp are refused, read nothing and write nothing outside",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, p := range []string{"../escape", "/etc/escape", "/workspace/../etc/escape", "/tmp/../escape", "a/../../escape", "/proc/self/root/escape", "/workspace/\x00x"} {
				if _, err := sb.Agent().Put(ctx, p, 0o644, strings.NewReader("x")); err == nil {
					t.Errorf("put %q was accepted", p)
				}
			}
			for _, p := range []string{"../../../../etc/passwd", "/etc/passwd", "/workspace/../etc/passwd", "/proc/1/root/etc/passwd", "/proc/self/environ"} {
				var buf bytes.Buffer
				if _, err := sb.Agent().Get(ctx, p, &buf, 1<<20); err == nil || buf.Len() > 0 {
					t.Errorf("get %q: %d bytes, err %v; want refused", p, buf.Len(), err)
				}
			}
			if _, err := sb.Agent().Put(ctx, "/tmp/fine", 0o644, strings.NewReader("x")); err != nil {
				t.Errorf("put /tmp/fine: %v", err)
			}
			r := e.Sh(sb, "ls -a / /etc /workspace | grep -c escape; true")
			if strings.TrimSpace(r.Stdout) != "0" {
				t.Errorf("a refused put left a file: %s", r)
			}
		}},
	{Group: Files, Name: "fifo-and-sockets",
		Want: "a FIFO and a unix socket in the workspace never block or fool the host: the agent refuses to read them at once, and on the host they open without blocking and are not regular files",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
os.mkfifo("/workspace/pipe")
s = socket.socket(socket.AF_UNIX); s.bind("/workspace/sock")
report("made", "ok")
`)
			e.expectProbes(r, []string{"ok"}, "made")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, n := range []string{"pipe", "sock"} {
				start := time.Now()
				if _, err := sb.Agent().Get(ctx, n, io.Discard, 1<<20); err == nil {
					t.Errorf("the agent read %s", n)
				}
				if time.Since(start) > 5*time.Second {
					t.Errorf("reading %s blocked for %v", n, time.Since(start))
				}
			}
			if err := sb.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			files := collect(t, sb.WorkspaceDir())
			for _, n := range []string{"pipe", "sock"} {
				if _, ok := files[n]; ok {
					t.Errorf("%s was read as a regular file", n)
				}
			}
		}},
	{Group: Files, Name: "file-changed-while-collected",
		Want: "a file a background process keeps rewriting is still after Stop: the host reads the same size, time and content twice, 300 ms apart",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Sh(sb, `setsid bash -c 'while :; do head -c $((RANDOM * 8)) /dev/urandom > /workspace/busy.bin; done' </dev/null >/dev/null 2>&1 & sleep 0.3; echo started`)
			if !strings.Contains(r.Stdout, "started") {
				t.Fatalf("start the writer: %s", r)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := sb.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			a := collect(t, sb.WorkspaceDir())["busy.bin"]
			// What is checked: the same content twice, 300 ms apart.
			time.Sleep(300 * time.Millisecond)
			b := collect(t, sb.WorkspaceDir())["busy.bin"]
			if sha256.Sum256([]byte(a)) != sha256.Sum256([]byte(b)) {
				t.Fatalf("the file changed after Stop: %d bytes, then %d", len(a), len(b))
			}
		}},
}

// collect reads the workspace the way a careful host does: one component
// at a time from the directory above it (so paths of any length work),
// never following a symlink (openat2 RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS), never opening anything but a regular file, and
// never blocking on one (O_NONBLOCK). It returns the regular files by
// path relative to dir.
func collect(t *testing.T, dir string) map[string]string {
	t.Helper()
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open the workspace: %v", err)
	}
	out := map[string]string{}
	var walk func(dirfd int, rel string, depth int)
	walk = func(dirfd int, rel string, depth int) {
		d := os.NewFile(uintptr(dirfd), rel)
		defer d.Close()
		if depth > 64 {
			return
		}
		names, _ := d.Readdirnames(-1)
		for _, n := range names {
			p := n
			if rel != "" {
				p = rel + "/" + n
			}
			fd, err := openBeneath(dirfd, n, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW)
			if err != nil {
				continue
			}
			var st unix.Stat_t
			unix.Fstat(fd, &st)
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFDIR:
				walk(fd, p, depth+1)
			case unix.S_IFREG:
				f := os.NewFile(uintptr(fd), p)
				b, _ := io.ReadAll(io.LimitReader(f, 8<<20))
				f.Close()
				out[p] = string(b)
			default:
				unix.Close(fd)
			}
		}
	}
	walk(root, "", 0)
	return out
}

func openBeneath(root int, rel string, flags int) (int, error) {
	for {
		fd, err := unix.Openat2(root, rel, &unix.OpenHow{
			Flags:   uint64(flags | unix.O_CLOEXEC),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
			return fd, err
		}
	}
}
