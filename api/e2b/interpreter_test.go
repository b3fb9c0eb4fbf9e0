package e2b_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// cell is what /execute streamed for one cell.
type cell struct {
	status int
	stdout string
	main   string // the main result's text
	errs   []string
	lines  int
}

// run executes code (in the context cid, or in the default Python
// context when cid is empty).
func (n *node) run(t *testing.T, s sandbox, cid, code string) cell {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"code": code})
	if cid != "" {
		body, _ = json.Marshal(map[string]string{"code": code, "context_id": cid})
	}
	r := n.do(t, "POST", "/execute", s.interp(), bytes.NewReader(body))
	c := cell{status: r.status}
	if r.status != 200 {
		return c
	}
	for _, l := range strings.Split(strings.TrimSpace(string(r.body)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("execute: line %q: %v", l, err)
		}
		c.lines++
		switch m["type"] {
		case "stdout":
			c.stdout += m["text"].(string)
		case "result":
			if m["is_main_result"] == true {
				c.main, _ = m["text"].(string)
			}
		case "error":
			c.errs = append(c.errs, m["name"].(string))
		}
	}
	return c
}

// context makes a context and returns its ID.
func (n *node) context(t *testing.T, s sandbox, body string) string {
	t.Helper()
	r := n.do(t, "POST", "/contexts", s.interp(), strings.NewReader(body))
	var c struct{ ID, Language, Cwd string }
	if r.json(t, &c); r.status != 200 || c.ID == "" {
		t.Fatalf("create a context: %d %s", r.status, r.body)
	}
	return c.ID
}

func (n *node) contexts(t *testing.T, s sandbox) map[string]string {
	t.Helper()
	r := n.do(t, "GET", "/contexts", s.interp(), nil)
	var l []struct{ ID, Language string }
	if r.json(t, &l); r.status != 200 {
		t.Fatalf("list contexts: %d %s", r.status, r.body)
	}
	out := map[string]string{}
	for _, c := range l {
		out[c.ID] = c.Language
	}
	return out
}

// TestInterpreter checks the code interpreter's contexts past the wire
// shapes: a client that disconnects interrupts its cell and the context
// lives on; restart clears a context's state; delete ends it; a deleted
// default context is made again on the next cell.
func TestInterpreter(t *testing.T) {
	n := newNode(t)
	s := n.create(t, n.keyA, `{"templateID":"code-interpreter-v1"}`)

	t.Run("a disconnect interrupts the cell", func(t *testing.T) {
		cid := n.context(t, s, `{"language":"python"}`)
		ctx, drop := context.WithTimeout(context.Background(), 2*time.Minute)
		defer drop()
		code := "x = 41\nimport time\nprint('go', flush=True)\ntime.sleep(60)\nx = 0"
		body, _ := json.Marshal(map[string]string{"code": code, "context_id": cid})
		req, _ := http.NewRequestWithContext(ctx, "POST", n.url+"/execute", bytes.NewReader(body))
		for k, v := range s.interp() {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"text":"go\n"`) {
				break
			}
		}
		if sc.Err() != nil {
			t.Fatalf("before the cell printed: %v", sc.Err())
		}
		start := time.Now()
		drop() // the SDK gave up

		// The next cell runs at once in the same context, whose state
		// is as the interrupted cell left it: x was never reset.
		c := n.run(t, s, cid, "x + 1")
		if c.status != 200 || c.main != "42" || len(c.errs) != 0 {
			t.Fatalf("the next cell: %+v", c)
		}
		if took := time.Since(start); took > 45*time.Second {
			t.Errorf("the next cell finished %s after the disconnect: the first was not interrupted", took)
		}
	})

	t.Run("restart and delete", func(t *testing.T) {
		cid := n.context(t, s, `{"language":"python","cwd":"/tmp"}`)
		if c := n.run(t, s, cid, "import os\ny = 5\nos.getcwd()"); c.main != "'/tmp'" {
			t.Fatalf("a context in /tmp: %+v", c)
		}
		if got := n.contexts(t, s); got[cid] != "python" {
			t.Fatalf("contexts: %v", got)
		}
		if r := n.do(t, "POST", "/contexts/"+cid+"/restart", s.interp(), nil); r.status != 204 {
			t.Fatalf("restart: %d %s", r.status, r.body)
		}
		if c := n.run(t, s, cid, "y"); c.status != 200 || len(c.errs) != 1 || c.errs[0] != "NameError" {
			t.Fatalf("after restart, the state is gone: %+v", c)
		}
		if c := n.run(t, s, cid, "y = 6\ny"); c.main != "6" {
			t.Fatalf("the restarted context runs: %+v", c)
		}
		if r := n.do(t, "DELETE", "/contexts/"+cid, s.interp(), nil); r.status != 204 {
			t.Fatalf("delete: %d %s", r.status, r.body)
		}
		if _, ok := n.contexts(t, s)[cid]; ok {
			t.Errorf("a deleted context is listed")
		}
		for _, c := range []struct{ method, path string }{
			{"DELETE", "/contexts/" + cid},
			{"POST", "/contexts/" + cid + "/restart"},
		} {
			if r := n.do(t, c.method, c.path, s.interp(), nil); r.status != 404 {
				t.Errorf("%s %s of a deleted context: %d %s", c.method, c.path, r.status, r.body)
			}
		}
		if c := n.run(t, s, cid, "1"); c.status != 404 {
			t.Errorf("a cell in a deleted context: %+v", c)
		}
	})

	t.Run("the default context is made again", func(t *testing.T) {
		if c := n.run(t, s, "", "z = 1\nz"); c.main != "1" {
			t.Fatalf("default context: %+v", c)
		}
		// Delete every Python context: the default one is among them.
		for id, lang := range n.contexts(t, s) {
			if lang != "python" {
				continue
			}
			if r := n.do(t, "DELETE", "/contexts/"+id, s.interp(), nil); r.status != 204 {
				t.Fatalf("delete %s: %d %s", id, r.status, r.body)
			}
		}
		if c := n.run(t, s, "", "'z' in globals()"); c.status != 200 || c.main != "False" {
			t.Fatalf("after deleting the default context: %+v", c)
		}
		if c := n.run(t, s, "", "z = 2\nz"); c.main != "2" {
			t.Fatalf("the new default context: %+v", c)
		}
	})
}
