package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeQMP serves one connection: a greeting, then for each command the
// replies reply returns (events first, as QEMU may send them).
func fakeQMP(t *testing.T, greeting string, reply func(cmd string) []string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qmp.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte(greeting + "\r\n"))
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			var req struct {
				Execute string `json:"execute"`
			}
			if json.Unmarshal(sc.Bytes(), &req) != nil {
				return
			}
			for _, line := range reply(req.Execute) {
				c.Write([]byte(line + "\r\n"))
			}
		}
	}()
	return path
}

const greeting = `{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}}, "capabilities": ["oob"]}}`

func TestQMP(t *testing.T) {
	path := fakeQMP(t, greeting, func(cmd string) []string {
		switch cmd {
		case "qmp_capabilities":
			return []string{`{"return": {}}`}
		case "query-status":
			return []string{`{"event": "RESUME", "timestamp": {"seconds": 1}}`, `{"return": {"status": "running", "running": true}}`}
		}
		return []string{`{"error": {"class": "CommandNotFound", "desc": "The command ` + cmd + ` has not been found"}}`}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := dialQMP(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var st struct {
		Status string `json:"status"`
	}
	if err := q.Execute(ctx, "query-status", nil, &st); err != nil || st.Status != "running" {
		t.Fatalf("query-status: %+v, %v", st, err)
	}
	err = q.Execute(ctx, "no-such", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "CommandNotFound") {
		t.Fatalf("an error reply: %v", err)
	}
}

// A monitor that greets wrongly, never answers or sends an endless line
// fails the call in time; nothing hangs.
func TestQMPHostileMonitor(t *testing.T) {
	tests := []struct {
		name     string
		greeting string
		reply    func(string) []string
	}{
		{"no greeting", `{"return": {}}`, func(string) []string { return nil }},
		{"not json", `hello`, func(string) []string { return nil }},
		{"silent", greeting, func(string) []string { return nil }},
		{"endless line", greeting, func(string) []string { return []string{`{"return": "` + strings.Repeat("x", 200<<10)} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := fakeQMP(t, tt.greeting, tt.reply)
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			start := time.Now()
			q, err := dialQMP(ctx, path)
			if err == nil {
				q.Close()
				t.Fatal("a hostile monitor was accepted")
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("took %v", time.Since(start))
			}
		})
	}
}
