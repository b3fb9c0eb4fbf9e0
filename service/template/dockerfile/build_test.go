package dockerfile_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/service/template/dockerfile"
)

// syncBuffer is a build log tests read while a build writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newBuilder is a builder on the gvisor backend with a cache of its own
// on the images' file system (results are hard links into them).
func newBuilder(t *testing.T) *dockerfile.Builder { return newBuilderWith(t, nil) }

// newBuilderWith is newBuilder with its config changed by mod first.
func newBuilderWith(t *testing.T, mod func(*dockerfile.Config)) *dockerfile.Builder {
	t.Helper()
	testenv.Agent(t)
	base := testenv.Image(t, "base")
	runner := testenv.GVisor(t)
	dir, err := os.MkdirTemp(testenv.StateDir(), "dockerfile-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	images := testenv.Images(t)
	cfg := dockerfile.Config{
		Dir:    dir,
		Runner: runner,
		ResolveFrom: func(ctx context.Context, ref string) (*airlock.Image, error) {
			if ref == "base" {
				return base, nil
			}
			return images.Resolve(ctx, ref)
		},
		StepLimits: airlock.Limits{CPUs: 1, MemoryBytes: 512 << 20, Pids: 256, Timeout: 2 * time.Minute},
	}
	if mod != nil {
		mod(&cfg)
	}
	b, err := dockerfile.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeContext makes a build context directory from path -> content.
func writeContext(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const appDockerfile = `FROM base
ARG GREETING=hello
ENV APP_HOME=/opt/app \
    MODE=test
WORKDIR $APP_HOME
COPY app/ ./
COPY --chown=sandbox:sandbox data.txt /home/data.txt
RUN echo "$GREETING from $(id -u) in $(pwd)" > greeting.txt && python3 app.py > out.txt
RUN echo scratch > scratch.txt && rm -f /etc/issue.net
RUN rm scratch.txt
USER sandbox
RUN id -u > /tmp/uid
RUN ["/bin/sh", "-c", "echo exec form > /tmp/exec.txt"]
`

func read(t *testing.T, rootfs, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rootfs, p))
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return strings.TrimSpace(string(b))
}

func TestBuildRunsStepsAndCaches(t *testing.T) {
	b := newBuilder(t)
	ctxDir := writeContext(t, map[string]string{
		"app/app.py": "import os\nprint('app', os.environ['MODE'])\n",
		"data.txt":   "data\n",
	})
	ctx := context.Background()
	var log syncBuffer
	t0 := time.Now()
	res, err := b.Build(ctx, dockerfile.Request{Dockerfile: []byte(appDockerfile), ContextDir: ctxDir, Log: &log})
	if err != nil {
		t.Fatalf("build: %v\nlog:\n%s", err, log.String())
	}
	cold := time.Since(t0)
	r := res.Rootfs
	if got := read(t, r, "opt/app/greeting.txt"); got != "hello from 0 in /opt/app" {
		t.Errorf("greeting.txt = %q", got)
	}
	if got := read(t, r, "opt/app/out.txt"); got != "app test" {
		t.Errorf("out.txt = %q (ENV not seen by RUN?)", got)
	}
	if got := read(t, r, "tmp/uid"); got != "1000" {
		t.Errorf("USER sandbox ran as %q", got)
	}
	if got := read(t, r, "tmp/exec.txt"); got != "exec form" {
		t.Errorf("exec.txt = %q", got)
	}
	fi, err := os.Stat(filepath.Join(r, "home/data.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1000 || st.Gid != 1000 {
		t.Errorf("COPY --chown: owner %d:%d, want 1000:1000", st.Uid, st.Gid)
	}
	fi, err = os.Stat(filepath.Join(r, "opt/app/app.py"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
		t.Errorf("COPY without --chown: owner %d, want root as in Docker", st.Uid)
	}
	for _, gone := range []string{"opt/app/scratch.txt", "etc/issue.net"} {
		if _, err := os.Lstat(filepath.Join(r, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s should have been removed by a RUN: %v", gone, err)
		}
	}
	if _, err := os.Stat(filepath.Join(r, "opt/airlock/bin/airlock-agent")); err != nil {
		t.Errorf("agent missing from the result: %v", err)
	}
	if res.User != "sandbox" || res.UID != 1000 || res.GID != 1000 || res.Workdir != "/opt/app" {
		t.Errorf("final config: user %q %d:%d workdir %q", res.User, res.UID, res.GID, res.Workdir)
	}
	env := strings.Join(res.Env, " ")
	if !strings.Contains(env, "APP_HOME=/opt/app") || !strings.Contains(env, "MODE=test") || strings.Contains(env, "GREETING") {
		t.Errorf("final env %q: want ENV values and no ARG", env)
	}
	// The base image is untouched.
	if _, err := os.Stat(filepath.Join(res.From.Rootfs, "etc/issue.net")); err != nil {
		t.Errorf("the base image lost /etc/issue.net: %v", err)
	}

	// Unchanged: every step from the cache, same result.
	log = syncBuffer{}
	t0 = time.Now()
	again, err := b.Build(ctx, dockerfile.Request{Dockerfile: []byte(appDockerfile), ContextDir: ctxDir, Log: &log})
	if err != nil {
		t.Fatalf("rebuild: %v\n%s", err, log.String())
	}
	cached := time.Since(t0)
	for _, s := range again.Steps {
		if !s.Cached {
			t.Errorf("rebuild ran step %d (%s) again", s.Index, s.Text)
		}
	}
	if again.Key != res.Key || again.Rootfs != res.Rootfs {
		t.Errorf("rebuild key %s, want %s", again.Key, res.Key)
	}
	t.Logf("cold build %.2fs, cached rebuild %.2fs", cold.Seconds(), cached.Seconds())
	if cached > 10*time.Second {
		t.Errorf("a cached rebuild took %s", cached)
	}

	// A changed build argument reruns the RUN that sees it and what
	// follows; a changed context file reruns its COPY.
	log = syncBuffer{}
	changed, err := b.Build(ctx, dockerfile.Request{Dockerfile: []byte(appDockerfile), ContextDir: ctxDir,
		BuildArgs: map[string]string{"GREETING": "bonjour"}, Log: &log})
	if err != nil {
		t.Fatalf("build with an argument: %v\n%s", err, log.String())
	}
	wantCached := map[int]bool{3: true, 4: true, 5: true} // WORKDIR and both COPYs
	for _, s := range changed.Steps[1:] {
		if s.Text[:3] == "RUN" && s.Cached {
			t.Errorf("step %d (%s) cached after GREETING changed", s.Index, s.Text)
		}
		if wantCached[s.Index] && !s.Cached {
			t.Errorf("step %d (%s) reran; it does not depend on GREETING", s.Index, s.Text)
		}
	}
	if got := read(t, changed.Rootfs, "opt/app/greeting.txt"); got != "bonjour from 0 in /opt/app" {
		t.Errorf("greeting.txt = %q", got)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "data.txt"), []byte("new data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log = syncBuffer{}
	recopied, err := b.Build(ctx, dockerfile.Request{Dockerfile: []byte(appDockerfile), ContextDir: ctxDir, Log: &log})
	if err != nil {
		t.Fatalf("build after a context change: %v\n%s", err, log.String())
	}
	for _, s := range recopied.Steps {
		if s.Index == 5 && s.Cached {
			t.Errorf("COPY data.txt cached after data.txt changed")
		}
		if s.Index == 4 && !s.Cached {
			t.Errorf("COPY app/ reran; app/ did not change")
		}
	}
	if got := read(t, recopied.Rootfs, "home/data.txt"); got != "new data" {
		t.Errorf("data.txt = %q", got)
	}
}

func TestBuildFailingRunNamesItsLine(t *testing.T) {
	b := newBuilder(t)
	var log syncBuffer
	_, err := b.Build(context.Background(), dockerfile.Request{
		Dockerfile: []byte("FROM base\nRUN echo one\n\nRUN echo about to fail; exit 3\nRUN echo never\n"),
		Log:        &log,
	})
	var se *dockerfile.StepError
	if !errors.As(err, &se) || !errors.Is(err, dockerfile.ErrStepFailed) {
		t.Fatalf("err = %v, want a StepError", err)
	}
	if se.Line != 4 || se.ExitCode != 3 {
		t.Errorf("step error line %d exit %d, want line 4 exit 3", se.Line, se.ExitCode)
	}
	if l := log.String(); !strings.Contains(l, "about to fail") || !strings.Contains(l, "line 4") || strings.Contains(l, "never\n") {
		t.Errorf("log:\n%s", l)
	}
}

func TestBuildHasNoNetwork(t *testing.T) {
	b := newBuilder(t)
	var log syncBuffer
	_, err := b.Build(context.Background(), dockerfile.Request{
		Dockerfile: []byte("FROM base\nRUN python3 -c 'import socket; socket.create_connection((\"10.0.2.2\", 80), timeout=3)'\n"),
		Log:        &log,
	})
	var se *dockerfile.StepError
	if !errors.As(err, &se) || se.ExitCode == 0 {
		t.Fatalf("a RUN reached the network: %v\n%s", err, log.String())
	}
}

func TestBuildCopyCannotEscape(t *testing.T) {
	b := newBuilder(t)
	ctxDir := writeContext(t, map[string]string{"ok.txt": "ok"})
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(ctxDir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(ctxDir, "up")); err != nil {
		t.Fatal(err)
	}
	for _, df := range []string{
		"FROM base\nCOPY ../x /x\n",
		"FROM base\nCOPY /../../etc/passwd /x\n",
		"FROM base\nCOPY link /x\n",
		"FROM base\nCOPY up/ /x/\n",
	} {
		var log syncBuffer
		_, err := b.Build(context.Background(), dockerfile.Request{Dockerfile: []byte(df), ContextDir: ctxDir, Log: &log})
		if !errors.Is(err, dockerfile.ErrEscape) {
			t.Errorf("%q: err = %v, want ErrEscape\n%s", df, err, log.String())
		}
	}
	// A RUN that plants a symlink to the host's /etc cannot make a
	// later COPY write outside the rootfs.
	var log syncBuffer
	res, err := b.Build(context.Background(), dockerfile.Request{
		Dockerfile: []byte("FROM base\nRUN ln -s " + filepath.Dir(secret) + " /planted\nCOPY ok.txt /planted/host-secret\n"),
		ContextDir: ctxDir, Log: &log,
	})
	if err == nil {
		if got := read(t, res.Rootfs, "planted/host-secret"); got != "ok" {
			t.Errorf("copied file reads %q", got)
		}
	}
	if got, _ := os.ReadFile(secret); string(got) != "host" {
		t.Fatalf("the host file was overwritten through a symlink: %q", got)
	}
}
