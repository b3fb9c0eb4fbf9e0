package template_test

import (
	"archive/tar"
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/node"
	"github.com/airlockhq/airlock/service/provision"
)

// contextTar is a build context of one file.
func contextTar(t *testing.T, name, body string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(body))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestTemplateRestoreKeepsWorkspaceAndTmp: sessions started from a
// template's base snapshot see what the template put in /workspace and
// what its start_cmd wrote to /tmp and /workspace before the checkpoint,
// as a cold start does: for a Dockerfile template whose WORKDIR, COPY and
// RUN write under /workspace, for a template made from a session of it
// (which inherits its start_cmd), and for one made with the session's
// memory.
func TestTemplateRestoreKeepsWorkspaceAndTmp(t *testing.T) {
	s := teststack.New(t, teststack.Options{Snapshots: true, Pool: provision.PoolConfig{Disabled: true}, Templates: &node.TemplatesConfig{}})
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	a := s.NewTenant(t, "a")
	c := a.Client
	body := contextTar(t, "seed.txt", "seeded\n")
	tc, err := c.UploadTemplateContext(ctx, bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateTemplate(ctx, airlock.CreateTemplateRequest{
		Name: "app", Context: tc.ID,
		Dockerfile: "FROM base\nWORKDIR /workspace/app\nCOPY seed.txt ./\nRUN echo built > built.txt\n",
		// A file it keeps open, and a directory of its own, in /tmp.
		StartCmd: "mkdir -p /tmp/run && echo fromstart > /workspace/app/started.txt && echo started > /tmp/run/started && exec sleep 100000 < /tmp/run/started",
		ReadyCmd: "test -s /tmp/run/started",
	})
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	if err := c.TemplateLogs(ctx, "app", &log); err != nil {
		t.Fatal(err)
	}
	if tp, err := c.Template(ctx, "app"); err != nil || tp.Status != airlock.TemplateReady {
		t.Fatalf("template app: %+v %v\n%s", tp, err, log.String())
	}

	// check makes a session from the template, checks what it sees and
	// returns where its sandbox came from.
	check := func(name, script, want string) (string, string) {
		t.Helper()
		sess, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Template: name, TimeoutS: 600})
		if err != nil {
			t.Fatalf("session from %s: %v", name, err)
		}
		e, err := c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: script})
		if err != nil {
			t.Fatal(err)
		}
		if e.ExitCode != 0 || e.Stdout != want {
			t.Fatalf("session from %s (%s): exit %d stdout %q stderr %q, want %q", name, sess.StartSource, e.ExitCode, e.Stdout, e.Stderr, want)
		}
		return sess.ID, sess.StartSource
	}
	const appFiles = "cat app/seed.txt app/built.txt app/started.txt /tmp/run/started"
	const appWant = "seeded\nbuilt\nfromstart\nstarted\n"
	// The first start is cold and makes the base snapshot; later ones
	// restore it.
	var last string
	testreq.Eventually(t, 4*time.Minute, "a session from app restored from its base snapshot", func() bool {
		id, src := check("app", appFiles, appWant)
		if src == airlock.StartRestore {
			last = id
			return true
		}
		c.DeleteSession(ctx, id)
		return false
	})

	// A template of that (restored) session, without and with memory.
	if e, err := c.Exec(ctx, last, airlock.SessionExecRequest{Shell: "echo mine > note.txt"}); err != nil || e.ExitCode != 0 {
		t.Fatalf("write in the session: %+v %v", e, err)
	}
	for _, mem := range []bool{false, true} {
		name := "fromsess"
		if mem {
			name = "fromsessmem"
		}
		if _, err := c.SessionTemplate(ctx, last, airlock.SessionTemplateRequest{Name: name, IncludeMemory: mem}); err != nil {
			t.Fatalf("template %s: %v", name, err)
		}
		testreq.Eventually(t, 2*time.Minute, "template "+name+" ready", func() bool {
			tp, err := c.Template(ctx, name)
			if err != nil || tp.Status == airlock.TemplateFailed {
				t.Fatalf("template %s: %+v %v", name, tp, err)
			}
			return tp.Status == airlock.TemplateReady
		})
	}
	c.DeleteSession(ctx, last)
	const sessFiles = appFiles + " note.txt"
	const sessWant = appWant + "mine\n"
	testreq.Eventually(t, 4*time.Minute, "a session from fromsess restored from its base snapshot", func() bool {
		id, src := check("fromsess", sessFiles, sessWant)
		c.DeleteSession(ctx, id)
		return src == airlock.StartRestore
	})
	// From the memory snapshot: every session is a restore of it.
	for range 2 {
		id, _ := check("fromsessmem", sessFiles+"; "+countSleeps, sessWant+"1\n")
		c.DeleteSession(ctx, id)
	}
	for _, name := range []string{"fromsessmem", "fromsess", "app"} {
		if err := c.DeleteTemplate(ctx, name); err != nil {
			t.Errorf("delete %s: %v", name, err)
		}
	}
}

// countSleeps counts the start_cmd's processes (sleep 100000) in a
// sandbox: there is no ps in the base image, and the pattern is split so
// as not to count itself.
const countSleeps = `python3 -c "import glob; print(sum(b'sleep\x00' + b'100000' in open(p, 'rb').read() for p in glob.glob('/proc/[0-9]*/cmdline')))"`
