package agent_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

func TestWarmPython(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		testreq.Skip(t, "skipped: python3 not installed on this host; scripts/setup.sh installs it")
	}
	cases := []struct {
		name   string
		code   string
		code0  int
		stdout string
		stderr string
	}{
		{"prints and uses preloaded module", "import json\nprint(json.dumps([1]), __name__)\n", 0, "[1] __main__\n", ""},
		{"exit code", "import sys\nsys.exit(3)\n", 3, "", ""},
		{"exception shows traceback from the file", "def f():\n    raise ValueError('boom')\nf()\n", 1, "", "ValueError: boom"},
		{"argv and cwd", "import sys, os\nprint(sys.argv[0].endswith('main.py'), os.getcwd() == os.environ['WS'])\n", 0, "True True\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := start(t)
			if err := h.c.Prepare(h.ctx(30*time.Second), protocol.PrepareRequest{Runtime: protocol.RuntimePython, Preload: []string{"json"}, Env: []string{"WS=" + h.ws}}); err != nil {
				t.Fatalf("prepare: %v", err)
			}
			path := filepath.Join(h.ws, "main.py")
			if err := os.WriteFile(path, []byte(c.code), 0o644); err != nil {
				t.Fatal(err)
			}
			before := h.healthy().Processes
			r := h.exec(protocol.ExecRequest{Argv: []string{"python3", path}, Warm: true, Env: []string{"WS=" + h.ws}})
			st := r.wait(20 * time.Second)
			if before != 1 {
				t.Errorf("%d processes before the exec, want the warm runtime only", before)
			}
			if st.Code != c.code0 || r.stdout.String() != c.stdout || !strings.Contains(r.stderr.String(), c.stderr) {
				t.Errorf("got code %d stdout %q stderr %q; want %d %q containing %q", st.Code, r.stdout.String(), r.stderr.String(), c.code0, c.stdout, c.stderr)
			}
			if strings.Contains(r.stderr.String(), "runpy") || strings.Contains(r.stderr.String(), "_airlock_warm") {
				t.Errorf("traceback shows the runner's frames: %q", r.stderr.String())
			}
		})
	}
}

func TestWarmNotUsedWhenEnvDiffers(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		testreq.Skip(t, "skipped: python3 not installed on this host; scripts/setup.sh installs it")
	}
	h := start(t)
	if err := h.c.Prepare(h.ctx(30*time.Second), protocol.PrepareRequest{Runtime: protocol.RuntimePython}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(h.ws, "main.py")
	os.WriteFile(path, []byte("import os\nprint(os.environ.get('X'))\n"), 0o644)
	r := h.exec(protocol.ExecRequest{Argv: []string{"python3", path}, Warm: true, Env: []string{"X=1"}})
	r.wait(20 * time.Second)
	if r.stdout.String() != "1\n" {
		t.Fatalf("stdout %q: the exec did not get its environment", r.stdout.String())
	}
	if n := h.healthy().Processes; n != 1 {
		t.Fatalf("%d processes: the warm runtime should still be waiting", n)
	}
}
