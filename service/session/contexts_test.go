package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

func TestCodeContexts(t *testing.T) {
	s := newStack(t, nil)
	sess := s.create(s.a, airlock.CreateSessionRequest{})
	ctx := ctxFor(t, 3*time.Minute)
	c := s.a.c
	py, err := c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil || py.State != airlock.ContextIdle || py.Language != airlock.ContextPython {
		t.Fatalf("create: %+v %v", py, err)
	}
	run := func(cid, code string, timeout int) *airlock.CellResult {
		t.Helper()
		r, err := c.RunCell(ctx, sess.ID, cid, airlock.RunCellRequest{Code: code, TimeoutSec: timeout})
		if err != nil {
			t.Fatalf("cell %q: %v", code, err)
		}
		return r
	}

	// Variables, imports and open files persist.
	run(py.ID, "import json\nf = open('log.txt', 'w')\nf.write('one\\n')\nn = 1", 0)
	if r := run(py.ID, "f.write('two\\n'); f.flush(); n += 1; json.dumps({'n': n})", 0); r.Value != `'{"n": 2}'` {
		t.Fatalf("persistence: %+v", r)
	}
	if e := s.shell(s.a, sess.ID, "cat log.txt"); e.Stdout != "one\ntwo\n" {
		t.Fatalf("open file: %q", e.Stdout)
	}
	// An exception is a result, with a traceback from the cell.
	r := run(py.ID, "def f(x):\n    return x / 0\nf(1)", 0)
	if r.Error == nil || r.Error.Name != "ZeroDivisionError" || r.Error.Value != "division by zero" ||
		!strings.Contains(r.Error.Traceback, "return x / 0") || r.ContextState != airlock.ContextIdle {
		t.Fatalf("exception: %+v", r.Error)
	}
	// display() and several figures in one cell.
	r = run(py.ID, "import matplotlib.pyplot as plt\nimport pandas as pd\nfor i in range(2):\n    plt.figure()\n    plt.plot([1, 2, i])\ndisplay(pd.DataFrame({'a': [1, 2]}))", 0)
	var pngs, html int
	for _, o := range r.Outputs {
		switch o.Type {
		case "image/png":
			pngs++
		case "text/html":
			html++
		}
	}
	if pngs != 2 || html != 1 || r.Error != nil {
		t.Fatalf("rich outputs: %d PNGs, %d HTML, %+v", pngs, html, r.Error)
	}
	// Figures are closed after the cell: the next one has none.
	if r := run(py.ID, "1", 0); len(r.Outputs) != 0 {
		t.Fatalf("figures carried over: %d outputs", len(r.Outputs))
	}

	// Past its timeout a cell gets KeyboardInterrupt and the context lives.
	start := time.Now()
	r = run(py.ID, "import time\nprint('working', flush=True)\ntime.sleep(60)", 1)
	if !r.TimedOut || r.Error == nil || r.Error.Name != "KeyboardInterrupt" || r.Stdout != "working\n" || r.ContextState != airlock.ContextIdle {
		t.Fatalf("timeout: %+v", r)
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("a 1 s cell timeout took %v", d)
	}
	if r := run(py.ID, "n", 0); r.Value != "2" {
		t.Fatalf("state after the interrupt: %+v", r)
	}

	// A crash is reported, not hung; the context is dead until restarted.
	r = run(py.ID, "import os\nos.kill(os.getpid(), 9)", 0)
	if r.Error == nil || r.Error.Name != "InterpreterDied" || r.ContextState != airlock.ContextDead {
		t.Fatalf("crash: %+v", r)
	}
	_, err = c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "1"})
	wantProblem(t, "run in a dead context", err, 409, "context-dead")
	cs, err := c.ListContexts(ctx, sess.ID)
	if err != nil || len(cs) != 1 || cs[0].State != airlock.ContextDead {
		t.Fatalf("list: %+v %v", cs, err)
	}
	if rc, err := c.RestartContext(ctx, sess.ID, py.ID); err != nil || rc.State != airlock.ContextIdle {
		t.Fatalf("restart: %+v %v", rc, err)
	}
	if r := run(py.ID, "'n' in dir()", 0); r.Value != "False" {
		t.Fatalf("after restart: %+v", r)
	}

	// Node.
	js, err := c.CreateContext(ctx, sess.ID, airlock.ContextNode)
	if err != nil {
		t.Fatal(err)
	}
	run(js.ID, "globalThis.total = 40; const fs = require('fs')", 0)
	if r := run(js.ID, "total + 2", 0); r.Value != "42" {
		t.Fatalf("node: %+v %+v", r, r.Error)
	}
	if r := run(js.ID, "fs.readFileSync('log.txt', 'utf8')", 0); r.Value != `'one\ntwo\n'` {
		t.Fatalf("node reads the workspace: %+v", r)
	}
	if r := run(js.ID, "for (;;) {}", 1); !r.TimedOut || r.Error == nil || r.ContextState != airlock.ContextIdle {
		t.Fatalf("node timeout: %+v", r)
	}

	// Streaming: output as it is printed, then the result.
	var out lockedBuffer
	begin := time.Now()
	r, err = c.RunCellStreaming(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "import time\nprint('a', flush=True)\ntime.sleep(2)\nprint('b')\n'done'"}, &out, nil)
	if err != nil || r.Value != "'done'" || out.String() != "a\nb\n" || r.Stdout != "a\nb\n" {
		t.Fatalf("streamed cell: %+v %q %v", r, out.String(), err)
	}
	if out.at.Sub(begin) > 1500*time.Millisecond {
		t.Errorf("first line of the cell came after %v", out.at.Sub(begin))
	}

	if err := c.DeleteContext(ctx, sess.ID, js.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.RunCell(ctx, sess.ID, js.ID, airlock.RunCellRequest{Code: "1"})
	wantProblem(t, "run in a deleted context", err, 404, "context-not-found")
	if e := s.shell(s.a, sess.ID, "ps -eo comm | sort | uniq -c"); strings.Contains(e.Stdout, "node") {
		t.Errorf("the deleted context's interpreter still runs:\n%s", e.Stdout)
	}
}
