package agent_test

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

func needInterpreter(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		testreq.Skipf(t, "skipped: %s not installed on this host; scripts/setup.sh installs it", name)
	}
}

// cell runs code in a context and returns its result and output.
func (h *harness) cell(id, code string, timeout time.Duration) (*protocol.CellResult, string, string) {
	h.t.Helper()
	var out, errb bytes.Buffer
	res, err := h.c.RunCell(h.ctx(30*time.Second), id, code, timeout.Milliseconds(), &out, &errb)
	if err != nil {
		h.t.Fatalf("RunCell %q: %v", code, err)
	}
	return res, out.String(), errb.String()
}

func TestPythonContext(t *testing.T) {
	needInterpreter(t, "python3")
	h := start(t)
	if _, err := h.c.CreateContext(h.ctx(30*time.Second), protocol.ContextRequest{ID: "py", Language: "python"}); err != nil {
		t.Fatal(err)
	}
	_, err := h.c.CreateContext(h.ctx(30*time.Second), protocol.ContextRequest{ID: "py", Language: "python"})
	if code := remoteCode(t, err); code != "exists" {
		t.Errorf("duplicate context: %s", code)
	}

	res, out, _ := h.cell("py", "x = 41\nprint('hello')", 0)
	if res.Error != nil || res.Value != "" || out != "hello\n" {
		t.Fatalf("first cell: %+v out %q", res, out)
	}
	res, _, _ = h.cell("py", "x + 1", 0)
	if res.Value != "42" {
		t.Fatalf("state did not persist: %+v", res)
	}
	res, _, _ = h.cell("py", "def f():\n    return 1/0\nf()", 0)
	if res.Error == nil || res.Error.Name != "ZeroDivisionError" || !strings.Contains(res.Error.Traceback, "<cell 3>") ||
		!strings.Contains(res.Error.Traceback, "return 1/0") || strings.Contains(res.Error.Traceback, "python_context") {
		t.Fatalf("error: %+v", res.Error)
	}
	res, _, _ = h.cell("py", "def (", 0)
	if res.Error == nil || res.Error.Name != "SyntaxError" {
		t.Fatalf("syntax error: %+v", res.Error)
	}
	// Output that is written with and without newlines, on both streams,
	// arrives complete and in order before the result.
	res, out, errOut := h.cell("py", "import sys, os\nfor i in range(1000): print(i, end=' ')\nsys.stderr.write('err')\nos.write(1, b'raw')\n'done'", 0)
	if !strings.HasPrefix(out, "0 1 2") || !strings.HasSuffix(out, "999 raw") || errOut != "err" || res.Value != "'done'" {
		t.Fatalf("output %q / %q, result %+v", out[max(0, len(out)-40):], errOut, res)
	}

	// A cell past its timeout gets KeyboardInterrupt; the context lives.
	start := time.Now()
	res, _, _ = h.cell("py", "import time\ntime.sleep(30)", 500*time.Millisecond)
	if !res.TimedOut || res.Died || res.Error == nil || res.Error.Name != "KeyboardInterrupt" {
		t.Fatalf("timeout: %+v", res)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("interrupt took %v", d)
	}
	if res, _, _ = h.cell("py", "x", 0); res.Value != "41" {
		t.Fatalf("context lost its state after the interrupt: %+v", res)
	}

	// A crash is reported, and the context stays dead until restarted.
	res, _, _ = h.cell("py", "import os\nos._exit(3)", 0)
	if !res.Died || res.Error == nil || res.Error.Name != "InterpreterDied" || !strings.Contains(res.Error.Value, "status 3") {
		t.Fatalf("crash: %+v", res)
	}
	_, err = h.c.RunCell(h.ctx(10*time.Second), "py", "1", 0, nil, nil)
	if code := remoteCode(t, err); code != "context_dead" {
		t.Fatalf("run in a dead context: %s", code)
	}
	if _, err := h.c.RestartContext(h.ctx(30*time.Second), "py"); err != nil {
		t.Fatal(err)
	}
	res, _, _ = h.cell("py", "'x' in globals()", 0)
	if res.Value != "False" {
		t.Fatalf("restart kept state: %+v", res)
	}
	if err := h.c.CloseContext(h.ctx(10*time.Second), "py"); err != nil {
		t.Fatal(err)
	}
	_, err = h.c.RunCell(h.ctx(10*time.Second), "py", "1", 0, nil, nil)
	if code := remoteCode(t, err); code != "not_found" {
		t.Fatalf("run in a closed context: %s", code)
	}
	h.healthy()
}

// Interrupting a cell from the host (the caller went away).
func TestContextInterruptByHost(t *testing.T) {
	needInterpreter(t, "python3")
	h := start(t)
	if _, err := h.c.CreateContext(h.ctx(30*time.Second), protocol.ContextRequest{ID: "py", Language: "python"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := h.c.RunCell(ctx, "py", "import time\ntime.sleep(30)", 0, nil, nil)
	if err == nil {
		t.Fatal("cell outlived its context")
	}
	// The next cell waits for the interrupted one, then runs.
	res, _, _ := h.cell("py", "1 + 1", 0)
	if res.Value != "2" {
		t.Fatalf("after interrupt: %+v", res)
	}
}

func TestNodeContext(t *testing.T) {
	needInterpreter(t, "node")
	h := start(t)
	if _, err := h.c.CreateContext(h.ctx(30*time.Second), protocol.ContextRequest{ID: "js", Language: "node"}); err != nil {
		t.Fatal(err)
	}
	res, out, _ := h.cell("js", "var n = 41; console.log('hi')", 0)
	if res.Error != nil || out != "hi\n" {
		t.Fatalf("first cell: %+v %q", res, out)
	}
	// A cell's own top-level names do not collide with the runner's.
	if res, _, _ = h.cell("js", "const fs = require('fs'); let util = 1; typeof fs.readFileSync", 0); res.Value != "'function'" {
		t.Fatalf("top-level const: %+v %+v", res, res.Error)
	}
	if res, _, _ = h.cell("js", "n + 1", 0); res.Value != "42" {
		t.Fatalf("state: %+v", res)
	}
	if res, _, _ = h.cell("js", "Promise.resolve(7)", 0); res.Value != "7" {
		t.Fatalf("promise: %+v", res)
	}
	if res, _, _ = h.cell("js", "null.x", 0); res.Error == nil || res.Error.Name != "TypeError" ||
		!strings.Contains(res.Error.Traceback, "<cell 5>") || strings.Contains(res.Error.Traceback, "[eval]") {
		t.Fatalf("error: %+v", res)
	}
	res, _, _ = h.cell("js", "while (true) {}", 300*time.Millisecond)
	if !res.TimedOut || res.Died || res.Error == nil || res.Error.Name != "Interrupted" {
		t.Fatalf("timeout: %+v", res)
	}
	res, _, _ = h.cell("js", "new Promise(() => {})", 300*time.Millisecond)
	if !res.TimedOut || res.Died || res.Error == nil {
		t.Fatalf("pending promise: %+v", res)
	}
	if res, _, _ = h.cell("js", "n", 0); res.Value != "41" {
		t.Fatalf("after interrupt: %+v", res)
	}
	if res, _, _ = h.cell("js", "process.exit(2)", 0); !res.Died {
		t.Fatalf("exit: %+v", res)
	}
}

// A program started with a memory limit cannot allocate past it, and
// the agent serves on.
func TestExecMemoryLimit(t *testing.T) {
	needInterpreter(t, "python3")
	h := start(t)
	r := h.exec(protocol.ExecRequest{
		Argv:             []string{"python3", "-c", "b = bytearray(1 << 30)"},
		MemoryLimitBytes: 300 << 20,
	})
	st := r.wait(30 * time.Second)
	if st.Code != 1 || !strings.Contains(r.stderr.String(), "MemoryError") {
		t.Fatalf("status %+v stderr %q", st, r.stderr.String())
	}
	r = h.exec(protocol.ExecRequest{Argv: []string{"sh", "-c", "ulimit -v"}, MemoryLimitBytes: 300 << 20})
	if st := r.wait(10 * time.Second); st.Code != 0 || strings.TrimSpace(r.stdout.String()) != "307200" {
		t.Fatalf("ulimit -v: %+v %q", st, r.stdout.String())
	}
	r = h.exec(protocol.ExecRequest{Argv: []string{"no-such-program"}, MemoryLimitBytes: 300 << 20})
	if st := r.wait(10 * time.Second); st.Code != 127 {
		t.Fatalf("missing program: %+v", st)
	}
	h.healthy()
}
