package dockerfile_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/template/dockerfile"
)

// countServers counts the processes running server.py (there is no ps
// in the base image; the pattern is split so as not to count itself).
const countServers = `python3 -c "import glob; print(sum(('serv'+'er.py').encode() in open(p,'rb').read() for p in glob.glob('/proc/[0-9]*/cmdline')))"`

// TestTemplateSandboxRunsStartCmd boots a sandbox on a built rootfs,
// starts its start_cmd, waits for its ready_cmd, and finds the process
// running with the image's files and environment.
func TestTemplateSandboxRunsStartCmd(t *testing.T) {
	b := newBuilder(t)
	ctxDir := writeContext(t, map[string]string{
		"server.py": "import os, time\nopen('/tmp/ready', 'w').write(os.environ['GREETING'])\nwhile True:\n    time.sleep(1)\n",
	})
	var log syncBuffer
	res, err := b.Build(context.Background(), dockerfile.Request{
		Dockerfile: []byte("FROM base\nENV GREETING=hi\nWORKDIR /srv\nCOPY server.py .\nRUN chmod 0755 server.py\n"),
		ContextDir: ctxDir, Log: &log,
	})
	if err != nil {
		t.Fatalf("build: %v\n%s", err, log.String())
	}
	backend := testenv.GVisor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := backend.Create(ctx, airlock.SandboxSpec{ID: "tpl-" + testenv.RandomID(), Image: res.Image("tpl"), Limits: airlock.Limits{
		CPUs: 1, MemoryBytes: 512 << 20, DiskBytes: 100 << 20, Pids: 128, Timeout: time.Minute, OutputBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	var out bytes.Buffer
	err = provision.Start(ctx, sb.Agent(), provision.StartSpec{
		StartCmd: "exec python3 /srv/server.py", ReadyCmd: "test -s /tmp/ready", Timeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	procs, err := sb.Agent().Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	running := false
	for _, p := range procs {
		running = running || (p.Tag == provision.StartTag && p.Running)
	}
	if !running {
		t.Errorf("start_cmd not running: %+v", procs)
	}
	p, err := sb.Agent().Exec(ctx, airlock.ExecRequest{Argv: []string{"/bin/sh", "-c", "cat /tmp/ready; echo; " + countServers + "; id -un"}}, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(ctx); err != nil || st.Code != 0 {
		t.Fatalf("exec: %v %+v: %s", err, st, out.String())
	}
	if got := strings.Fields(out.String()); len(got) != 3 || got[0] != "hi" || got[1] != "1" || got[2] != "sandbox" {
		t.Errorf("in the sandbox: %q (want the ENV value, one server, the sandbox user)", got)
	}

	// A ready_cmd that never succeeds, and a start_cmd that exits.
	err = provision.Start(ctx, sb.Agent(), provision.StartSpec{ReadyCmd: "false", Timeout: time.Second})
	if !errors.Is(err, provision.ErrNotReady) {
		t.Errorf("ready_cmd false: %v, want ErrNotReady", err)
	}
	err = provision.Start(ctx, sb.Agent(), provision.StartSpec{StartCmd: "exit 4", ReadyCmd: "false", Timeout: 20 * time.Second})
	if !errors.Is(err, provision.ErrNotReady) || !strings.Contains(err.Error(), "code 4") {
		t.Errorf("start_cmd exits: %v, want ErrNotReady naming code 4", err)
	}
}
