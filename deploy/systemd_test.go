package deploy_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// unitKeys are the keys the units may use, by section: those systemd
// knows (systemd.unit(5), systemd.service(5), systemd.exec(5),
// systemd.kill(5), systemd.resource-control(5)) that these units use.
// A key not listed here fails the test, so a misspelt one cannot be
// silently ignored by systemd; add a key here only after checking the
// manual.
var unitKeys = map[string][]string{
	"Unit":    {"Description", "Documentation", "After", "Before", "Wants", "Requires", "BindsTo", "PartOf", "ConditionPathExists"},
	"Install": {"WantedBy", "RequiredBy", "Alias"},
	"Service": {
		"Type", "User", "Group", "EnvironmentFile", "Environment", "ExecStart", "ExecStartPre", "ExecReload",
		"KillSignal", "KillMode", "TimeoutStopSec", "TimeoutStartSec", "Restart", "RestartSec",
		"Delegate", "LimitNOFILE", "LimitNPROC", "TasksMax", "StateDirectory", "StateDirectoryMode",
		"NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "OOMScoreAdjust",
	},
}

// unit is a parsed unit file: section -> key -> values.
type unit map[string]map[string][]string

var sectionRe = regexp.MustCompile(`^\[([A-Za-z]+)\]$`)

// parseUnit reads a unit file strictly: every line is a comment, a
// section header or Key=Value of a known key in its section.
func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
			continue
		case sectionRe.MatchString(line):
			section = sectionRe.FindStringSubmatch(line)[1]
			if _, ok := unitKeys[section]; !ok {
				t.Errorf("%s:%d: unknown section [%s]", path, n, section)
			}
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		switch {
		case !ok:
			t.Errorf("%s:%d: not Key=Value: %q", path, n, line)
		case section == "":
			t.Errorf("%s:%d: %s before any section", path, n, k)
		case !contains(unitKeys[section], k):
			t.Errorf("%s:%d: key %s is not one known in [%s]", path, n, k, section)
		case strings.TrimSpace(v) == "" && k != "Environment":
			t.Errorf("%s:%d: %s is empty", path, n, k)
		default:
			u[section][k] = append(u[section][k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestUnitParserRejects(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range []string{
		"[Service]\nExecStrat=/bin/true\n",
		"[Sevrice]\nExecStart=/bin/true\n",
		"ExecStart=/bin/true\n",
		"[Service]\njust words\n",
	} {
		p := filepath.Join(dir, "x.service")
		os.WriteFile(p, []byte(bad), 0o644)
		ft := &testing.T{}
		done := make(chan struct{})
		go func() { defer close(done); parseUnit(ft, p) }()
		<-done
		if !ft.Failed() {
			t.Errorf("parseUnit accepted %q", bad)
		}
	}
}

// TestUnits checks every unit and drop-in: strictly by the parser above,
// the invariants airlockd relies on, and with systemd-analyze verify
// where systemd is installed.
func TestUnits(t *testing.T) {
	files, _ := filepath.Glob("systemd/*.service")
	dropins, _ := filepath.Glob("systemd/*.service.d/*.conf")
	if len(files) < 2 || len(dropins) < 1 {
		t.Fatalf("units %v, drop-ins %v: want airlockd, etcd and the postgresql drop-in", files, dropins)
	}
	for _, f := range append(files, dropins...) {
		parseUnit(t, f)
	}

	a := parseUnit(t, "systemd/airlockd.service")
	svc := a["Service"]
	if got := svc["KillMode"]; len(got) != 1 || got[0] != "process" {
		t.Errorf("airlockd.service KillMode %v: want process, so a stop leaves kept sessions' sandboxes running", got)
	}
	if _, ok := svc["User"]; ok {
		t.Error("airlockd.service sets User=: airlockd must run as root")
	}
	for _, k := range []string{"ProtectSystem", "PrivateTmp", "PrivateDevices", "ProtectHome"} {
		if _, ok := svc[k]; ok {
			t.Errorf("airlockd.service sets %s: it would give airlockd a mount namespace its restarted self would not share", k)
		}
	}
	if got := svc["EnvironmentFile"]; len(got) != 1 || got[0] != "/etc/airlock/airlockd.env" {
		t.Errorf("airlockd.service EnvironmentFile %v", got)
	}

	verify(t, files, dropins)
}

// verify runs systemd-analyze verify on the units (and on a stand-in
// postgresql@.service with the drop-ins), with the units' directory as
// the unit path. The binaries the units start are not installed here,
// so only that complaint is let through; any other line fails.
func verify(t *testing.T, files, dropins []string) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is not installed: the units were checked by the strict parser only")
		return
	}
	dir := t.TempDir()
	var names []string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644)
		names = append(names, filepath.Join(dir, filepath.Base(f)))
	}
	// The drop-ins, on a stand-in for the unit of Debian's package.
	for _, d := range dropins {
		ddir := filepath.Join(dir, filepath.Base(filepath.Dir(d)))
		os.MkdirAll(ddir, 0o755)
		b, _ := os.ReadFile(d)
		os.WriteFile(filepath.Join(ddir, filepath.Base(d)), b, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "postgresql@.service"), []byte("[Unit]\nDescription=stand-in\n[Service]\nExecStart=/bin/true\n"), 0o644)
	names = append(names, filepath.Join(dir, "postgresql@15-main.service"))
	os.Symlink(filepath.Join(dir, "postgresql@.service"), filepath.Join(dir, "postgresql@15-main.service"))

	cmd := exec.Command(sa, append([]string{"verify", "--man=no"}, names...)...)
	cmd.Env = append(os.Environ(), "SYSTEMD_UNIT_PATH="+dir+":")
	out, _ := cmd.CombinedOutput()
	notInstalled := regexp.MustCompile(`^[\w@.-]+: Command (/usr/local/bin/airlockd|/usr/bin/etcd) is not executable: No such file or directory$`)
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if line == "" || notInstalled.MatchString(line) {
			continue
		}
		t.Errorf("systemd-analyze verify: %s", line)
	}
}
