package protocol_test

import (
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/airlockhq/airlock/agent/protocol"
)

// message is what Decode accepts: a pointer to any message type.
type message = any

// messageTypes makes a fresh value of every message type, by name.
var messageTypes = []struct {
	name string
	new  func() message
}{
	{"Hello", func() message { return new(protocol.Hello) }},
	{"Request", func() message { return new(protocol.Request) }},
	{"ExecRequest", func() message { return new(protocol.ExecRequest) }},
	{"ExitStatus", func() message { return new(protocol.ExitStatus) }},
	{"Response", func() message { return new(protocol.Response) }},
	{"FileInfo", func() message { return new(protocol.FileInfo) }},
	{"ErrorMessage", func() message { return new(protocol.ErrorMessage) }},
	{"SignalRequest", func() message { return new(protocol.SignalRequest) }},
	{"ChannelRequest", func() message { return new(protocol.ChannelRequest) }},
	{"ProcessInfo", func() message { return new(protocol.ProcessInfo) }},
	{"ContextInfo", func() message { return new(protocol.ContextInfo) }},
}

func newMessage(t testing.TB, name string) message {
	for _, m := range messageTypes {
		if m.name == name {
			return m.new()
		}
	}
	t.Fatalf("no message type %q", name)
	return nil
}

func TestDecode(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	entries := func(n int) string {
		e := make([]string, n)
		for i := range e {
			e[i] = `{"name":"f` + strings.Repeat("x", i%50) + `","size":1,"mode":420,"mtime_ns":0,"is_dir":false}`
		}
		return `{"entries":[` + strings.Join(e, ",") + `]}`
	}
	procs := func(n int) string {
		e := make([]string, n)
		for i := range e {
			e[i] = fmt.Sprintf(`{"pid":%d,"argv0":"sh","started_at_ms":1,"timeout_ms":0,"running":true,"attached":false}`, i+1)
		}
		return `{"processes":[` + strings.Join(e, ",") + `]}`
	}
	contexts := func(n int) string {
		e := make([]string, n)
		for i := range e {
			e[i] = fmt.Sprintf(`{"id":"c%d","language":"python","state":"idle","created_at_ms":1,"runs":0}`, i)
		}
		return `{"contexts":[` + strings.Join(e, ",") + `]}`
	}
	token := strings.Repeat("t", protocol.MinTokenBytes)
	manyArgs := `{"argv":["a"` + strings.Repeat(`,"a"`, protocol.MaxArgs) + `]}`
	bigArgs := `{"argv":["a","` + long(protocol.MaxArgBytes) + `"]}`

	tests := []struct {
		typ     string
		name    string
		payload string
		ok      bool
	}{
		// Hello
		{"Hello", "valid", `{"version":1,"agent":"dev","pid":1}`, true},
		{"Hello", "trailing whitespace", "{\"version\":1}\n\t ", true},
		{"Hello", "wrong version", `{"version":2,"agent":"dev","pid":1}`, false},
		{"Hello", "no version", `{"agent":"dev"}`, false},
		{"Hello", "long agent", `{"version":1,"agent":"` + long(protocol.MaxNameBytes+1) + `"}`, false},
		{"Hello", "unknown field", `{"version":1,"agent":"dev","pid":1,"root":true}`, false},
		{"Hello", "trailing object", `{"version":1} {}`, false},
		{"Hello", "trailing bracket", `{"version":1}]`, false},
		{"Hello", "trailing brace", `{"version":1}}`, false},
		{"Hello", "trailing garbage", `{"version":1} x`, false},
		{"Hello", "trailing null", `{"version":1}null`, false},
		{"Hello", "wrong type", `{"version":"1"}`, false},
		{"Hello", "float version", `{"version":1.5}`, false},
		{"Hello", "array", `[1]`, false},
		{"Hello", "token", `{"version":1,"agent":"dev","pid":1,"token":"` + token + `"}`, true},
		{"Hello", "short token", `{"version":1,"token":"` + long(protocol.MinTokenBytes-1) + `"}`, false},
		{"Hello", "long token", `{"version":1,"token":"` + long(protocol.MaxTokenBytes+1) + `"}`, false},
		{"Hello", "token with space", `{"version":1,"token":"` + token + ` "}`, false},
		{"Hello", "empty", ``, false},
		{"Hello", "truncated", `{"version":1`, false},

		// Request
		{"Request", "health", `{"op":"health"}`, true},
		{"Request", "shutdown", `{"op":"shutdown"}`, true},
		{"Request", "exec", `{"op":"exec","exec":{"argv":["sh","-c","true"],"timeout_ms":10}}`, true},
		{"Request", "get", `{"op":"get","path":"a/b","max":10}`, true},
		{"Request", "put tmp", `{"op":"put","path":"/tmp/x","mode":420}`, true},
		{"Request", "exec without exec", `{"op":"exec"}`, false},
		{"Request", "exec null", `{"op":"exec","exec":null}`, false},
		{"Request", "exec empty argv", `{"op":"exec","exec":{"argv":[]}}`, false},
		{"Request", "exec unknown nested field", `{"op":"exec","exec":{"argv":["a"],"uid":0}}`, false},
		{"Request", "unknown op", `{"op":"format"}`, false},
		{"Request", "no op", `{}`, false},
		{"Request", "null", `null`, false},
		{"Request", "get without path", `{"op":"get"}`, false},
		{"Request", "put dotdot", `{"op":"put","path":"../x"}`, false},
		{"Request", "list outside", `{"op":"list","path":"/etc"}`, false},
		{"Request", "stat nul", `{"op":"stat","path":"a\u0000b"}`, false},
		{"Request", "remove dotdot", `{"op":"remove","path":"/workspace/../etc"}`, false},
		{"Request", "negative mode", `{"op":"put","path":"x","mode":-1}`, false},
		{"Request", "unknown field", `{"op":"health","sudo":true}`, false},
		{"Request", "trailing", `{"op":"health"}{"op":"shutdown"}`, false},
		{"Request", "channel", `{"op":"channel","channel":{"path":"/run/airlock/agent.sock","token":"` + token + `"}}`, true},
		{"Request", "channel without channel", `{"op":"channel"}`, false},
		{"Request", "channel relative path", `{"op":"channel","channel":{"path":"run/agent.sock","token":"` + token + `"}}`, false},
		{"Request", "channel unclean path", `{"op":"channel","channel":{"path":"/run/../agent.sock","token":"` + token + `"}}`, false},
		{"Request", "channel trailing slash", `{"op":"channel","channel":{"path":"/run/","token":"` + token + `"}}`, false},
		{"Request", "channel empty token", `{"op":"channel","channel":{"path":"/run/a.sock","token":""}}`, false},
		{"Request", "channel token unknown field", `{"op":"channel","channel":{"path":"/run/a.sock","token":"` + token + `","x":1}}`, false},
		{"Request", "processes", `{"op":"processes"}`, true},
		{"Request", "context list", `{"op":"context_list"}`, true},
		{"Request", "attach", `{"op":"attach","pid":42}`, true},
		{"Request", "attach without pid", `{"op":"attach"}`, false},
		{"Request", "attach negative pid", `{"op":"attach","pid":-1}`, false},
		{"Request", "attach huge pid", `{"op":"attach","pid":4294967296}`, false},
		{"Request", "attach a terminal", `{"op":"attach","pid":42,"offset":1024,"stdin":true}`, true},
		{"Request", "attach negative offset", `{"op":"attach","pid":42,"offset":-1}`, false},
		{"Request", "attach offset not a number", `{"op":"attach","pid":42,"offset":"1"}`, false},
		{"Request", "attach stdin not bool", `{"op":"attach","pid":42,"stdin":1}`, false},
		{"Request", "detach", `{"op":"detach","pid":42}`, true},
		{"Request", "detach without pid", `{"op":"detach"}`, false},
		{"Request", "detach with stdin", `{"op":"detach","pid":42,"stdin":true}`, false},
		{"Request", "detach with offset", `{"op":"detach","pid":42,"offset":3}`, false},
		{"Request", "exec retained", `{"op":"exec","exec":{"argv":["a"],"retain_bytes":1048576}}`, true},

		// ExecRequest
		{"ExecRequest", "valid", `{"argv":["echo","hi"],"env":["A=1","B="],"cwd":"sub","stdin":true,"timeout_ms":1000}`, true},
		{"ExecRequest", "empty argv", `{"argv":[]}`, false},
		{"ExecRequest", "null argv", `{"argv":null}`, false},
		{"ExecRequest", "empty program", `{"argv":[""]}`, false},
		{"ExecRequest", "env without equals", `{"argv":["a"],"env":["A"]}`, false},
		{"ExecRequest", "env empty key", `{"argv":["a"],"env":["=1"]}`, false},
		{"ExecRequest", "negative timeout", `{"argv":["a"],"timeout_ms":-1}`, false},
		{"ExecRequest", "too many args", manyArgs, false},
		{"ExecRequest", "args too large", bigArgs, false},
		{"ExecRequest", "unknown field", `{"argv":["a"],"user":"root"}`, false},
		{"ExecRequest", "trailing", `{"argv":["a"]} 1`, false},
		{"ExecRequest", "retain max", `{"argv":["a"],"retain_bytes":16777216}`, true},
		{"ExecRequest", "retain too much", `{"argv":["a"],"retain_bytes":16777217}`, false},
		{"ExecRequest", "retain negative", `{"argv":["a"],"retain_bytes":-1}`, false},
		{"ExecRequest", "inline file", `{"argv":["a"],"files":[{"path":"/tmp/.airlock/main.py","mode":420,"data":"cHJpbnQoMSk="}]}`, true},
		{"ExecRequest", "inline file outside", `{"argv":["a"],"files":[{"path":"../etc/passwd","data":""}]}`, false},
		{"ExecRequest", "inline file bad mode", `{"argv":["a"],"files":[{"path":"x","mode":2048,"data":""}]}`, false},
		{"ExecRequest", "tag", `{"argv":["a"],"tag":"0123abcd"}`, true},
		{"ExecRequest", "bad tag", `{"argv":["a"],"tag":"a/b"}`, false},

		// ExitStatus
		{"ExitStatus", "zero", `{"code":0}`, true},
		{"ExitStatus", "signal", `{"code":137,"signal":9}`, true},
		{"ExitStatus", "timed out", `{"code":137,"signal":9,"timed_out":true}`, true},
		{"ExitStatus", "start error", `{"code":127,"error":"not found"}`, true},
		{"ExitStatus", "long error is cut", `{"code":127,"error":"` + long(10000) + `"}`, true},
		{"ExitStatus", "code 255", `{"code":255}`, true},
		{"ExitStatus", "code 256", `{"code":256}`, false},
		{"ExitStatus", "code 9999", `{"code":9999}`, false},
		{"ExitStatus", "negative code", `{"code":-1}`, false},
		{"ExitStatus", "signal 65", `{"code":0,"signal":65}`, false},
		{"ExitStatus", "negative signal", `{"code":0,"signal":-9}`, false},
		{"ExitStatus", "huge code", `{"code":99999999999999999999}`, false},
		{"ExitStatus", "unknown field", `{"code":0,"core":true}`, false},
		{"ExitStatus", "trailing", `{"code":0}]`, false},
		{"ExitStatus", "dropped", `{"code":0,"stdout_dropped":5,"stderr_dropped":1}`, true},
		{"ExitStatus", "negative dropped", `{"code":0,"stdout_dropped":-5}`, false},
		{"ExitStatus", "negative stderr dropped", `{"code":0,"stderr_dropped":-1}`, false},

		// Response
		{"Response", "empty", `{}`, true},
		{"Response", "pid", `{"pid":42}`, true},
		{"Response", "attach offset", `{"pid":42,"offset":8}`, true},
		{"Response", "negative offset", `{"pid":42,"offset":-8}`, false},
		{"Response", "health", `{"health":{"uptime_ms":5,"processes":1}}`, true},
		{"Response", "info", `{"info":{"name":"a","size":3,"mode":420,"mtime_ns":1,"is_dir":false}}`, true},
		{"Response", "max entries", entries(protocol.MaxListEntries), true},
		{"Response", "too many entries", entries(protocol.MaxListEntries + 1), false},
		{"Response", "entry with slash", `{"entries":[{"name":"a/b","size":0,"mode":0,"mtime_ns":0,"is_dir":false}]}`, false},
		{"Response", "entry dot", `{"entries":[{"name":".","size":0,"mode":0,"mtime_ns":0,"is_dir":true}]}`, false},
		{"Response", "entry dotdot", `{"entries":[{"name":"..","size":0,"mode":0,"mtime_ns":0,"is_dir":true}]}`, false},
		{"Response", "entry empty name", `{"entries":[{"name":"","size":0}]}`, false},
		{"Response", "entry nul", `{"entries":[{"name":"a\u0000","size":0}]}`, false},
		{"Response", "entry long name", `{"entries":[{"name":"` + long(protocol.MaxNameBytes+1) + `","size":0}]}`, false},
		{"Response", "entry negative size", `{"entries":[{"name":"a","size":-1}]}`, false},
		{"Response", "entry unknown field", `{"entries":[{"name":"a","size":0,"uid":0}]}`, false},
		{"Response", "info bad name", `{"info":{"name":"../x","size":0}}`, false},
		{"Response", "negative pid", `{"pid":-1}`, false},
		{"Response", "negative written", `{"written":-1}`, false},
		{"Response", "unknown field", `{"pid":1,"token":"x"}`, false},
		{"Response", "trailing", `{"pid":1},`, false},
		{"Response", "max processes", procs(protocol.MaxProcessList), true},
		{"Response", "too many processes", procs(protocol.MaxProcessList + 1), false},
		{"Response", "process pid twice", `{"processes":[{"pid":3},{"pid":3}]}`, false},
		{"Response", "process pid zero", `{"processes":[{"pid":0}]}`, false},
		{"Response", "process unknown field", `{"processes":[{"pid":3,"uid":0}]}`, false},
		{"Response", "max contexts", contexts(protocol.MaxContexts), true},
		{"Response", "too many contexts", contexts(protocol.MaxContexts + 1), false},
		{"Response", "context twice", `{"contexts":[{"id":"a","language":"node","state":"dead"},{"id":"a","language":"node","state":"dead"}]}`, false},
		{"Response", "context bad state", `{"contexts":[{"id":"a","language":"node","state":"sleepy"}]}`, false},

		// FileInfo
		{"FileInfo", "valid", `{"name":"a.txt","size":3,"mode":420,"mtime_ns":1,"is_dir":false}`, true},
		{"FileInfo", "dots in name", `{"name":"...","size":0}`, true},
		{"FileInfo", "slash", `{"name":"/","size":0}`, false},
		{"FileInfo", "mode overflow", `{"name":"a","mode":4294967296}`, false},
		{"FileInfo", "trailing", `{"name":"a"} {"name":"b"}`, false},

		// ErrorMessage
		{"ErrorMessage", "valid", `{"code":"not_found","message":"no such file"}`, true},
		{"ErrorMessage", "long message is cut", `{"code":"io","message":"` + long(10000) + `"}`, true},
		{"ErrorMessage", "long code", `{"code":"` + long(65) + `","message":""}`, false},
		{"ErrorMessage", "unknown field", `{"code":"io","message":"","stack":"x"}`, false},
		{"ErrorMessage", "trailing", `{"code":"io","message":""}"x"`, false},

		// SignalRequest
		{"SignalRequest", "term", `{"signal":15}`, true},
		{"SignalRequest", "rt max", `{"signal":64}`, true},
		{"SignalRequest", "zero", `{"signal":0}`, false},
		{"SignalRequest", "missing", `{}`, false},
		{"SignalRequest", "65", `{"signal":65}`, false},
		{"SignalRequest", "negative", `{"signal":-9}`, false},
		{"SignalRequest", "unknown field", `{"signal":9,"pid":1}`, false},
		{"SignalRequest", "trailing", `{"signal":9}{"signal":9}`, false},

		// ChannelRequest
		{"ChannelRequest", "valid", `{"path":"/run/airlock/agent.sock","token":"` + token + `"}`, true},
		{"ChannelRequest", "max token", `{"path":"/a","token":"` + strings.Repeat("A-_9", protocol.MaxTokenBytes/4) + `"}`, true},
		{"ChannelRequest", "long token", `{"path":"/a","token":"` + long(protocol.MaxTokenBytes+1) + `"}`, false},
		{"ChannelRequest", "short token", `{"path":"/a","token":"` + long(protocol.MinTokenBytes-1) + `"}`, false},
		{"ChannelRequest", "token not ascii", `{"path":"/a","token":"` + token + `é"}`, false},
		{"ChannelRequest", "token nul", `{"path":"/a","token":"` + token + `\u0000"}`, false},
		{"ChannelRequest", "root", `{"path":"/","token":"` + token + `"}`, true},
		{"ChannelRequest", "empty path", `{"path":"","token":"` + token + `"}`, false},
		{"ChannelRequest", "dot segment", `{"path":"/run/./a","token":"` + token + `"}`, false},
		{"ChannelRequest", "double slash", `{"path":"//run/a","token":"` + token + `"}`, false},
		{"ChannelRequest", "nul in path", `{"path":"/run/a\u0000","token":"` + token + `"}`, false},
		{"ChannelRequest", "long path", `{"path":"/` + long(protocol.MaxPathBytes) + `","token":"` + token + `"}`, false},
		{"ChannelRequest", "missing token", `{"path":"/a"}`, false},
		{"ChannelRequest", "trailing", `{"path":"/a","token":"` + token + `"}}`, false},

		// ProcessInfo
		{"ProcessInfo", "valid", `{"pid":7,"argv0":"python3","started_at_ms":1700000000000,"timeout_ms":60000,"running":true,"attached":true}`, true},
		{"ProcessInfo", "ended", `{"pid":7,"argv0":"","started_at_ms":0,"timeout_ms":0,"running":false,"attached":false}`, true},
		{"ProcessInfo", "long argv0 is cut", `{"pid":7,"argv0":"` + long(10000) + `"}`, true},
		{"ProcessInfo", "pid zero", `{"pid":0}`, false},
		{"ProcessInfo", "pid negative", `{"pid":-7}`, false},
		{"ProcessInfo", "pid huge", `{"pid":2147483648}`, false},
		{"ProcessInfo", "negative start", `{"pid":7,"started_at_ms":-1}`, false},
		{"ProcessInfo", "negative timeout", `{"pid":7,"timeout_ms":-1}`, false},
		{"ProcessInfo", "running not bool", `{"pid":7,"running":1}`, false},
		{"ProcessInfo", "unknown field", `{"pid":7,"uid":0}`, false},
		{"ProcessInfo", "trailing", `{"pid":7}{}`, false},
		{"ProcessInfo", "on a terminal", `{"pid":7,"pty":{"cols":80,"rows":24}}`, true},
		{"ProcessInfo", "terminal too wide", `{"pid":7,"pty":{"cols":1001,"rows":24}}`, false},
		{"ProcessInfo", "terminal of no size", `{"pid":7,"pty":{"cols":0,"rows":0}}`, false},
		{"ProcessInfo", "terminal unknown field", `{"pid":7,"pty":{"cols":80,"rows":24,"x":1}}`, false},

		// ContextInfo
		{"ContextInfo", "valid", `{"id":"py-1","language":"python","state":"busy","created_at_ms":1700000000000,"runs":3}`, true},
		{"ContextInfo", "node dead", `{"id":"js","language":"node","state":"dead","created_at_ms":0,"runs":0}`, true},
		{"ContextInfo", "bad id", `{"id":"a/b","language":"python","state":"idle"}`, false},
		{"ContextInfo", "empty id", `{"id":"","language":"python","state":"idle"}`, false},
		{"ContextInfo", "long id", `{"id":"` + long(65) + `","language":"python","state":"idle"}`, false},
		{"ContextInfo", "bad language", `{"id":"a","language":"ruby","state":"idle"}`, false},
		{"ContextInfo", "bad state", `{"id":"a","language":"python","state":""}`, false},
		{"ContextInfo", "negative runs", `{"id":"a","language":"python","state":"idle","runs":-1}`, false},
		{"ContextInfo", "negative created", `{"id":"a","language":"python","state":"idle","created_at_ms":-1}`, false},
		{"ContextInfo", "unknown field", `{"id":"a","language":"python","state":"idle","pid":1}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.typ+"/"+tt.name, func(t *testing.T) {
			v := newMessage(t, tt.typ)
			err := protocol.Decode([]byte(tt.payload), v)
			if tt.ok && err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !tt.ok && err == nil {
				t.Fatalf("Decode accepted %.200q as %+v", tt.payload, v)
			}
		})
	}
}

func TestDecodeCutsLongText(t *testing.T) {
	var st protocol.ExitStatus
	if err := protocol.Decode([]byte(`{"code":1,"error":"`+strings.Repeat("e", 10000)+`"}`), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Error) > protocol.MaxPathBytes {
		t.Errorf("exit error kept %d bytes", len(st.Error))
	}
	var m protocol.ErrorMessage
	if err := protocol.Decode([]byte(`{"code":"io","message":"`+strings.Repeat("m", 10000)+`"}`), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Message) > 4096 {
		t.Errorf("error message kept %d bytes", len(m.Message))
	}
	var p protocol.ProcessInfo
	if err := protocol.Decode(protocol.Encode(protocol.ProcessInfo{PID: 1, Argv0: strings.Repeat("€", 5000)}), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Argv0) > protocol.MaxNameBytes || !utf8.ValidString(p.Argv0) {
		t.Errorf("argv0 kept %d bytes, valid UTF-8 %v", len(p.Argv0), utf8.ValidString(p.Argv0))
	}
}

// TestDecodeCutsOnRuneBoundary checks that cut text stays valid UTF-8:
// the host stores these strings (Postgres refuses invalid UTF-8), and a
// cut rune would not survive re-encoding.
func TestDecodeCutsOnRuneBoundary(t *testing.T) {
	for pad := 0; pad < 4; pad++ {
		text := strings.Repeat("a", pad) + strings.Repeat("é€😀", 2000)
		var st protocol.ExitStatus
		if err := protocol.Decode(protocol.Encode(protocol.ExitStatus{Code: 1, Error: text}), &st); err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(st.Error) || len(st.Error) > protocol.MaxPathBytes || !strings.HasPrefix(text, st.Error) {
			t.Errorf("pad %d: exit error cut to %d bytes, valid UTF-8 %v", pad, len(st.Error), utf8.ValidString(st.Error))
		}
		var m protocol.ErrorMessage
		if err := protocol.Decode(protocol.Encode(protocol.ErrorMessage{Code: "io", Message: text}), &m); err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(m.Message) || len(m.Message) > 4096 || !strings.HasPrefix(text, m.Message) {
			t.Errorf("pad %d: message cut to %d bytes, valid UTF-8 %v", pad, len(m.Message), utf8.ValidString(m.Message))
		}
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	msgs := []message{
		&protocol.Hello{Version: protocol.Version, Agent: "build-1", PID: 1},
		&protocol.Request{Op: protocol.OpExec, Exec: &protocol.ExecRequest{Argv: []string{"sh", "-c", "echo hi"}, Env: []string{"A=b"}, Cwd: "d", Stdin: true, TimeoutMS: 5}},
		&protocol.Request{Op: protocol.OpPut, Path: "a/b", Mode: 0o600},
		&protocol.Request{Op: protocol.OpGet, Path: "/tmp/x", Max: 1 << 20},
		&protocol.ExitStatus{Code: 143, Signal: 15, TimedOut: true},
		&protocol.Response{PID: 7, Health: &protocol.Health{UptimeMS: 1, Processes: 2}, Entries: []protocol.FileInfo{{Name: "a", Size: 1, Mode: 0o644, MtimeNS: 3}}, More: true, Info: &protocol.FileInfo{Name: "d", IsDir: true}, Written: 9},
		&protocol.ErrorMessage{Code: "not_found", Message: "<nope> & \"quoted\""},
		&protocol.SignalRequest{Signal: 9},
		&protocol.Hello{Version: protocol.Version, Agent: "b", PID: 1, Token: strings.Repeat("x", protocol.MaxTokenBytes)},
		&protocol.Request{Op: protocol.OpChannel, Channel: &protocol.ChannelRequest{Path: "/run/airlock/agent.sock", Token: "0123456789abcdef-_"}},
		&protocol.Request{Op: protocol.OpAttach, PID: 77},
		&protocol.Request{Op: protocol.OpAttach, PID: 77, Offset: 1 << 40, Stdin: true},
		&protocol.Request{Op: protocol.OpDetach, PID: 78},
		&protocol.Response{PID: 77, Offset: 65536},
		&protocol.Response{Processes: []protocol.ProcessInfo{{PID: 5, Tag: "pty-0123", PTY: &protocol.PTYSize{Cols: 80, Rows: 24}}}},
		&protocol.Request{Op: protocol.OpProcesses},
		&protocol.Request{Op: protocol.OpContextList},
		&protocol.Request{Op: protocol.OpExec, Exec: &protocol.ExecRequest{Argv: []string{"a"}, RetainBytes: protocol.MaxRetainBytes}},
		&protocol.ExitStatus{Code: 1, StdoutDropped: 10, StderrDropped: 20},
		&protocol.Response{Processes: []protocol.ProcessInfo{{PID: 5, Argv0: "sh", StartedAtMS: 9, TimeoutMS: 100, Running: true, Attached: true}, {PID: 6}}},
		&protocol.Response{Contexts: []protocol.ContextInfo{{ID: "py", Language: protocol.ContextPython, State: protocol.ContextBusy, CreatedAtMS: 3, Runs: 2}}},
	}
	for _, m := range msgs {
		got := reflect.New(reflect.TypeOf(m).Elem()).Interface().(message)
		if err := protocol.Decode(protocol.Encode(m), got); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%T: got %+v, want %+v", m, got, m)
		}
	}
}

func TestCleanPath(t *testing.T) {
	tests := []struct {
		in        string
		root, rel string // root "" means an error is expected
	}{
		{"a", "/workspace", "a"},
		{"a/b/c.txt", "/workspace", "a/b/c.txt"},
		{"./a", "/workspace", "a"},
		{"a/", "/workspace", "a"},
		{"a//b", "/workspace", "a/b"},
		{"a/./b", "/workspace", "a/b"},
		{".", "/workspace", "."},
		{"./", "/workspace", "."},
		{"...", "/workspace", "..."},
		{"..a/b..", "/workspace", "..a/b.."},
		{"workspace/x", "/workspace", "workspace/x"},
		{"/workspace", "/workspace", "."},
		{"/workspace/", "/workspace", "."},
		{"/workspace/a/b", "/workspace", "a/b"},
		{"/workspace//a", "/workspace", "a"},
		{"/workspace///", "/workspace", "."},
		{"/tmp", "/tmp", "."},
		{"/tmp/x", "/tmp", "x"},
		{"/tmp//x/", "/tmp", "x"},
		{strings.Repeat("a", protocol.MaxPathBytes), "/workspace", strings.Repeat("a", protocol.MaxPathBytes)},

		{"", "", ""},
		{"..", "", ""},
		{"../x", "", ""},
		{"a/..", "", ""},
		{"a/../..", "", ""},
		{"a/../b", "", ""}, // stays inside, but ".." is refused outright
		{"/workspace/..", "", ""},
		{"/workspace/../etc/passwd", "", ""},
		{"/tmp/../etc", "", ""},
		{"/etc/passwd", "", ""},
		{"/", "", ""},
		{"//workspace/a", "", ""},
		{"/workspacex/a", "", ""},
		{"/tmpfoo", "", ""},
		{"/proc/self/root", "", ""},
		{"a\x00b", "", ""},
		{"/workspace/\x00", "", ""},
		{"\x00", "", ""},
		{strings.Repeat("a", protocol.MaxPathBytes+1), "", ""},
		{"/workspace/" + strings.Repeat("a/", protocol.MaxPathBytes), "", ""},
	}
	for _, tt := range tests {
		name := tt.in
		if len(name) > 40 {
			name = name[:40] + "..."
		}
		t.Run(name, func(t *testing.T) {
			root, rel, err := protocol.CleanPath(tt.in)
			if tt.root == "" {
				if err == nil {
					t.Fatalf("accepted: root %q rel %q", root, rel)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if root != tt.root || rel != tt.rel {
				t.Fatalf("got (%q, %.60q), want (%q, %.60q)", root, rel, tt.root, tt.rel)
			}
		})
	}
}

// checkCleanPath asserts the invariants of an accepted path.
func checkCleanPath(t *testing.T, in, root, rel string) {
	t.Helper()
	if !slices.Contains(protocol.Roots, root) {
		t.Fatalf("CleanPath(%q): root %q is not one of %v", in, root, protocol.Roots)
	}
	if rel == "" || path.IsAbs(rel) {
		t.Fatalf("CleanPath(%q): rel %q is empty or absolute", in, rel)
	}
	if slices.Contains(strings.Split(rel, "/"), "..") {
		t.Fatalf("CleanPath(%q): rel %q has a .. segment", in, rel)
	}
	if strings.ContainsRune(rel, 0) {
		t.Fatalf("CleanPath(%q): rel %q has a NUL", in, rel)
	}
	if path.Clean(rel) != rel {
		t.Fatalf("CleanPath(%q): rel %q is not clean", in, rel)
	}
	if full := path.Join(root, rel); full != root && !strings.HasPrefix(full, root+"/") {
		t.Fatalf("CleanPath(%q): %q is outside %q", in, full, root)
	}
}

func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a", "a/b", ".", "..", "a/../..", "/workspace", "/workspace/x", "/workspace//x", "/tmp/", "/etc/passwd", "a\x00", "", "./../x", "/tmp/../x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		root, rel, err := protocol.CleanPath(in)
		if err != nil {
			return
		}
		checkCleanPath(t, in, root, rel)
		// The cleaned path, given again in either form, means the same file.
		for _, again := range []string{path.Join(root, rel), rel} {
			if len(again) > protocol.MaxPathBytes {
				continue // the absolute form of a long relative path is longer
			}
			r2, rel2, err := protocol.CleanPath(again)
			if err != nil {
				t.Fatalf("CleanPath(%q) accepted, but its result %q is refused: %v", in, again, err)
			}
			if again == rel && root != "/workspace" {
				continue // a bare rel is relative to the workspace
			}
			if r2 != root || rel2 != rel {
				t.Fatalf("CleanPath(%q) = (%q, %q), but CleanPath(%q) = (%q, %q)", in, root, rel, again, r2, rel2)
			}
		}
	})
}

// normalize maps empty slices to nil, which encode the same (omitempty).
func normalize(m message) {
	switch v := m.(type) {
	case *protocol.Request:
		if v.Exec != nil && len(v.Exec.Env) == 0 {
			v.Exec.Env = nil
		}
	case *protocol.ExecRequest:
		if len(v.Env) == 0 {
			v.Env = nil
		}
	case *protocol.Response:
		if len(v.Entries) == 0 {
			v.Entries = nil
		}
		if len(v.Processes) == 0 {
			v.Processes = nil
		}
		if len(v.Contexts) == 0 {
			v.Contexts = nil
		}
	}
}

func FuzzDecodeMessages(f *testing.F) {
	seeds := []string{
		`{"version":1,"agent":"dev","pid":1}`,
		`{"op":"exec","exec":{"argv":["sh","-c","echo hi"],"env":["A=1"],"stdin":true,"timeout_ms":5}}`,
		`{"op":"get","path":"/workspace/a","max":10}`,
		`{"code":137,"signal":9,"timed_out":true,"error":"é"}`,
		`{"pid":3,"entries":[{"name":"a","size":1,"mode":420,"mtime_ns":1,"is_dir":false}],"more":true}`,
		`{"entries":[]}`,
		`{"code":"io","message":"x"}`,
		`{"signal":15}`,
		`{"version":1}]`,
		`{"VERSION":1}`,
		`null`,
		`{"code":1,"error":"` + strings.Repeat("€", 2000) + `"}`,
		`{"code":"io","message":"` + strings.Repeat("a€", 1500) + `"}`,
		`{"version":1,"agent":"dev","pid":1,"token":"0123456789abcdef"}`,
		`{"op":"channel","channel":{"path":"/run/airlock/agent.sock","token":"0123456789abcdef"}}`,
		`{"path":"/run/airlock/agent.sock","token":"0123456789abcdef"}`,
		`{"op":"attach","pid":12}`,
		`{"op":"attach","pid":12,"offset":4096,"stdin":true}`,
		`{"op":"detach","pid":12}`,
		`{"pid":12,"offset":99}`,
		`{"pid":3,"tag":"pty-1","pty":{"cols":80,"rows":24}}`,
		`{"op":"processes"}`,
		`{"op":"context_list"}`,
		`{"op":"exec","exec":{"argv":["a"],"retain_bytes":4096}}`,
		`{"code":0,"stdout_dropped":1,"stderr_dropped":2}`,
		`{"processes":[{"pid":3,"argv0":"sh","started_at_ms":1,"timeout_ms":2,"running":true,"attached":false}]}`,
		`{"pid":3,"argv0":"` + strings.Repeat("€", 2000) + `","started_at_ms":1}`,
		`{"contexts":[{"id":"py","language":"python","state":"idle","created_at_ms":1,"runs":2}]}`,
		`{"id":"py","language":"node","state":"dead","created_at_ms":1,"runs":2}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, mt := range messageTypes {
			v := mt.new()
			if err := protocol.Decode(payload, v); err != nil {
				continue
			}
			if err := protocol.Validate(v); err != nil {
				t.Fatalf("%s: decoded, but Validate fails: %v", mt.name, err)
			}
			again := mt.new()
			if err := protocol.Decode(protocol.Encode(v), again); err != nil {
				t.Fatalf("%s: %+v re-encoded as %s does not decode: %v", mt.name, v, protocol.Encode(v), err)
			}
			normalize(v)
			normalize(again)
			if !reflect.DeepEqual(v, again) {
				t.Fatalf("%s: decoded %.200v, re-encoded and decoded %.200v", mt.name, v, again)
			}
		}
	})
}
