package main

import (
	"encoding/json"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/node"
)

// envOf is a lookupEnv over a fixed map, so a test sees no variable of
// the machine it runs on.
func envOf(m map[string]string) lookupEnv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "airlockd.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadConfig is the node.Config that args, env and (if not empty) a
// config file holding file say.
func loadConfig(t *testing.T, file string, env map[string]string, args ...string) (node.Config, []string) {
	t.Helper()
	if file != "" {
		args = append([]string{"--config", writeFile(t, file)}, args...)
	}
	f := newFlags()
	warnings, err := f.load(args, envOf(env))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	c, err := f.config()
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return c, warnings
}

// The same settings given as a config file, as environment variables and
// as flags make the same configuration, and it differs from the default
// in every one of them.
func TestSettingsSameEverywhere(t *testing.T) {
	file := `
listen = "127.0.0.1:9999"
max-concurrent = 3
tenant-share = 0.5
max-timeout = "7m"
namespaces = true
egress = false
warm = ["base/bash", "python-ds/python"]
egress-permit = "10.9.0.0/16,10.8.0.0/16"
quota = ["sessions=3", "memory=2GiB"]
network-allow = ["acme=example.com:443,pypi.org"]
session-size-mib = ["small=2,512,1024"]
abuse-detectors = ["mining", "scanning"]
node-id = "n1"
metrics-key = "0123456789abcdef-metrics"
`
	env := map[string]string{
		"AIRLOCK_LISTEN": "127.0.0.1:9999", "AIRLOCK_MAX_CONCURRENT": "3", "AIRLOCK_TENANT_SHARE": "0.5",
		"AIRLOCK_MAX_TIMEOUT": "7m", "AIRLOCK_NAMESPACES": "true", "AIRLOCK_EGRESS": "false",
		"AIRLOCK_WARM": "base/bash,python-ds/python", "AIRLOCK_EGRESS_PERMIT": "10.9.0.0/16,10.8.0.0/16",
		"AIRLOCK_QUOTA": "sessions=3 memory=2GiB", "AIRLOCK_NETWORK_ALLOW": "acme=example.com:443,pypi.org",
		"AIRLOCK_SESSION_SIZE_MIB": "small=2,512,1024", "AIRLOCK_ABUSE_DETECTORS": "mining,scanning",
		"AIRLOCK_NODE_ID": "n1", "AIRLOCK_METRICS_KEY": "0123456789abcdef-metrics",
	}
	args := []string{"--listen", "127.0.0.1:9999", "--max-concurrent=3", "--tenant-share", "0.5", "--max-timeout", "7m",
		"--namespaces", "--egress=false", "--warm", "base/bash,python-ds/python", "--egress-permit", "10.9.0.0/16,10.8.0.0/16",
		"--quota", "sessions=3", "--quota", "memory=2GiB", "--network-allow", "acme=example.com:443,pypi.org",
		"--session-size-mib", "small=2,512,1024", "--abuse-detectors", "mining,scanning", "--node-id", "n1",
		"--metrics-key", "0123456789abcdef-metrics"}

	fromFile, _ := loadConfig(t, file, nil)
	fromEnv, _ := loadConfig(t, "", env)
	fromFlags, _ := loadConfig(t, "", nil, args...)
	def, _ := loadConfig(t, "", nil)
	for name, c := range map[string]node.Config{"environment": fromEnv, "flags": fromFlags} {
		if !reflect.DeepEqual(c, fromFile) {
			t.Errorf("the %s make\n%+v\nthe file makes\n%+v", name, c, fromFile)
		}
	}
	c := fromFile
	if c.Listen != "127.0.0.1:9999" || c.MaxConcurrent != 3 || c.TenantShare != 0.5 || c.MaxTimeout.String() != "7m0s" ||
		!c.Namespaces || !c.Egress.Disabled || len(c.Warm) != 2 || len(c.Egress.Permit) != 2 ||
		c.Quotas.Defaults["sessions"] != 3 || c.Quotas.Defaults["memory"] != 2<<30 || len(c.Egress.Allow["acme"]) != 2 ||
		c.Sessions.Sizes["small"].DiskBytes != 1024<<20 || c.Sessions.Sizes["small"].MemoryBytes != 512<<20 ||
		!reflect.DeepEqual(c.Abuse.Disable, []string{"fork-bomb", "dns-tunnel"}) ||
		c.Fleet.NodeID != "n1" || c.Trace.Node != "n1" || c.API.MetricsKey != "0123456789abcdef-metrics" {
		t.Errorf("the settings were not all applied: %+v", c)
	}
	if reflect.DeepEqual(def, c) || def.Namespaces || def.Egress.Disabled || len(def.Abuse.Disable) != 0 || def.MaxConcurrent == 3 {
		t.Errorf("the default configuration is not the default: %+v", def)
	}
}

// The precedence rule: flag over environment over file over default,
// option by option; repeatable options by their entries.
func TestSettingsPrecedence(t *testing.T) {
	file := "max-concurrent = 2\nmax-sessions = 5\npool-max = 4\nquota = [\"sessions=1\", \"runs=7\"]\n"
	env := map[string]string{"AIRLOCK_MAX_CONCURRENT": "3", "AIRLOCK_MAX_SESSIONS": "6", "AIRLOCK_QUOTA": "sessions=2"}
	c, _ := loadConfig(t, file, env, "--max-concurrent", "4", "--quota", "sessions=3")
	if c.MaxConcurrent != 4 || c.Sessions.Max != 6 || c.Pool.Max != 4 || c.MaxQueue != 0 {
		t.Errorf("max-concurrent %d (want 4, the flag), max-sessions %d (want 6, the environment), pool-max %d (want 4, the file), max-queue %d (want 0, the default)",
			c.MaxConcurrent, c.Sessions.Max, c.Pool.Max, c.MaxQueue)
	}
	if c.Quotas.Defaults["sessions"] != 3 || c.Quotas.Defaults["runs"] != 7 {
		t.Errorf("quotas %v: want sessions=3 (the flag) and runs=7 (the file)", c.Quotas.Defaults)
	}
	// AIRLOCK_CONFIG names the file when --config does not.
	p := writeFile(t, "max-concurrent = 9\n")
	f := newFlags()
	if _, err := f.load(nil, envOf(map[string]string{"AIRLOCK_CONFIG": p})); err != nil || f.cfg.MaxConcurrent != 9 {
		t.Errorf("AIRLOCK_CONFIG: %v, max-concurrent %d", err, f.cfg.MaxConcurrent)
	}
}

// A bad setting is an error that names it, wherever it was given: an
// unknown key, a value of the wrong type, a bad value, a boolean that is
// not one, an argument that is not a flag.
func TestSettingsErrors(t *testing.T) {
	tests := []struct {
		name, file string
		env        map[string]string
		args       []string
		want       string
	}{
		{"unknown key", "max-concurent = 4\n", nil, nil, `unknown key "max-concurent"`},
		{"underscore key", "max_concurrent = 4\n", nil, nil, `did you mean max-concurrent?`},
		{"wrong type", "max-concurrent = \"four\"\n", nil, nil, `key "max-concurrent": want an integer, not a string`},
		{"bool as string", "namespaces = \"true\"\n", nil, nil, `key "namespaces": want a boolean`},
		{"bad duration", "max-timeout = \"soon\"\n", nil, nil, `key "max-timeout": "soon" is not a duration`},
		{"duration as number", "max-timeout = 300\n", nil, nil, `key "max-timeout": want a duration`},
		{"table", "[pool]\nmax = 3\n", nil, nil, `unknown key "pool"`},
		{"bad quota", "quota = [\"bogus=1\"]\n", nil, nil, `key "quota": unknown quota "bogus"`},
		{"not toml", "max-concurrent = = 4\n", nil, nil, `config file`},
		{"bad bool env", "", map[string]string{"AIRLOCK_NAMESPACES": "yes-please"}, nil, `AIRLOCK_NAMESPACES: "yes-please"`},
		{"bad int env", "", map[string]string{"AIRLOCK_MAX_CONCURRENT": "4x"}, nil, `AIRLOCK_MAX_CONCURRENT: "4x" is not an integer`},
		{"bad bool flag", "", nil, []string{"--microvm=maybe"}, `--microvm: "maybe"`},
		{"unknown flag", "", nil, []string{"--max-concurent", "4"}, `max-concurent`},
		{"positional", "", nil, []string{"config", "print"}, `unexpected argument "config"`},
		{"positional after flags", "", nil, []string{"--pool-max", "0", "serve"}, `unexpected argument "serve"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config", writeFile(t, tt.file)}, args...)
			}
			_, err := newFlags().load(args, envOf(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	// Every spelling of a boolean in the environment works.
	for v, want := range map[string]bool{"true": true, "TRUE": true, "1": true, "yes": true, "on": true, "false": false, "0": false, "no": false, "Off": false} {
		c, _ := loadConfig(t, "", map[string]string{"AIRLOCK_NAMESPACES": v})
		if c.Namespaces != want {
			t.Errorf("AIRLOCK_NAMESPACES=%s: %v, want %v", v, c.Namespaces, want)
		}
	}
}

// The deprecated names still work, each with a warning naming it, and
// mean what they meant.
func TestDeprecatedAliases(t *testing.T) {
	c, warnings := loadConfig(t, "no-abuse = true\n", map[string]string{"AIRLOCK_NODE_NAME": "n2", "AIRLOCK_NO_EGRESS": "1"},
		"--no-snapshots", "--abuse-disable", "dns-tunnel", "--session-size", "small=1,1024,2147")
	if !c.Abuse.Off || !c.Egress.Disabled || !c.NoSnapshots || c.Fleet.NodeID != "n2" || c.Trace.Node != "n2" ||
		!reflect.DeepEqual(c.Abuse.Disable, []string{"dns-tunnel"}) || c.Sessions.Sizes["small"].DiskBytes != 2147*1000*1000 {
		t.Errorf("aliases not honoured: %+v", c)
	}
	all := strings.Join(warnings, "\n")
	for _, name := range []string{"key no-abuse of", "AIRLOCK_NODE_NAME", "AIRLOCK_NO_EGRESS", "--no-snapshots", "--abuse-disable", "--session-size "} {
		if !strings.Contains(all, name) {
			t.Errorf("no warning names %s:\n%s", name, all)
		}
	}
	if _, warnings := loadConfig(t, "", nil); len(warnings) != 0 {
		t.Errorf("warnings without deprecated names: %v", warnings)
	}
}

// config check names a bad key and exits non-zero; config print writes
// a file that config check accepts and that makes the same
// configuration, with the secrets redacted.
func TestConfigCommands(t *testing.T) {
	run := func(env map[string]string, args ...string) (string, string, int) {
		var out, errs strings.Builder
		code := run(args, &out, &errs, envOf(env))
		return out.String(), errs.String(), code
	}
	bad := writeFile(t, "max-concurrent = 4\nmax-sesions = 3\n")
	if _, errs, code := run(nil, "config", "check", "--config", bad); code == 0 || !strings.Contains(errs, `"max-sesions"`) {
		t.Errorf("config check of a bad key: exit %d, %q", code, errs)
	}
	good := writeFile(t, "max-concurrent = 4\nstore = \"postgres://airlock:hunter2@db:5432/airlock\"\n")
	if out, errs, code := run(nil, "config", "check", "--config", good); code != 0 || !strings.Contains(out, "ok") {
		t.Errorf("config check of a good file: exit %d, %q %q", code, out, errs)
	}
	env := map[string]string{"AIRLOCK_METRICS_KEY": "metrics-secret-0123456789", "AIRLOCK_FLEET_SECRET": "fleet-secret-0123456789"}
	out, errs, code := run(env, "config", "print", "--config", good, "--pool-max", "2")
	if code != 0 {
		t.Fatalf("config print: exit %d, %s", code, errs)
	}
	for _, secret := range []string{"hunter2", "metrics-secret", "fleet-secret-0"} {
		if strings.Contains(out, secret) {
			t.Errorf("config print shows %s:\n%s", secret, out)
		}
	}
	for _, want := range []string{"max-concurrent = 4  # from the file", "pool-max = 2  # from the flag", "# metrics-key = (redacted)  # from the environment", "postgres://airlock:redacted@db:5432/airlock"} {
		if !strings.Contains(out, want) {
			t.Errorf("config print lacks %q:\n%s", want, out)
		}
	}
	// What print wrote reads back as the same configuration (the
	// secrets, redacted, aside).
	printed := writeFile(t, out)
	if _, errs, code := run(nil, "config", "check", "--config", printed); code != 0 {
		t.Fatalf("config check of config print's output: exit %d, %s", code, errs)
	}
	want, _ := loadConfig(t, "max-concurrent = 4\n", nil, "--pool-max", "2")
	got, _ := loadConfig(t, strings.ReplaceAll(out, "airlock:redacted@", "airlock@"), nil)
	got.Store = want.Store
	want.Store = got.Store
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config print's output makes\n%+v\nnot\n%+v", got, want)
	}
	// Neither -h nor a stray argument starts anything.
	if out, _, code := run(nil, "-h"); code != 0 || !strings.Contains(out, "Fleet:\n") || !strings.Contains(out, "AIRLOCK_MAX_CONCURRENT") {
		t.Errorf("-h: exit %d\n%s", code, out)
	}
	if _, errs, code := run(nil, "config-print", "--config", good); code != 2 || !strings.Contains(errs, "unexpected argument") {
		t.Errorf("a stray argument: exit %d, %q", code, errs)
	}
	if _, _, code := run(nil, "config", "frobnicate"); code != 2 {
		t.Errorf("config frobnicate: exit %d", code)
	}
}

// -h lists every option under its group heading, with its variable, and
// the deprecated names apart.
func TestHelpGrouped(t *testing.T) {
	var b strings.Builder
	f := newFlags()
	f.usage(&b)
	help := b.String()
	for _, title := range groupTitles {
		if !strings.Contains(help, "\n"+title+":\n") {
			t.Errorf("-h lacks the heading %q", title)
		}
	}
	for _, o := range f.opts.list {
		if !strings.Contains(help, "\n  -"+o.name) || !strings.Contains(help, o.env()) {
			t.Errorf("-h lacks --%s or %s", o.name, o.env())
		}
	}
	if i, j := strings.Index(help, "\n  -pool-max "), strings.Index(help, "\nLimits:"); i < 0 || j < 0 || i > j || i < strings.Index(help, "\nPool:") {
		t.Errorf("--pool-max is not under Pool")
	}
}

// docs/configuration.md is what `airlockd config docs` writes: regenerate
// it with go generate ./cmd/airlockd.
func TestConfigDocs(t *testing.T) {
	want := newFlags().markdown()
	got, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("docs/configuration.md is stale: run go generate ./cmd/airlockd")
	}
	// The example file in it is a good configuration.
	_, rest, _ := strings.Cut(want, "```toml\n")
	example, _, _ := strings.Cut(rest, "```")
	f := newFlags()
	if _, err := f.load([]string{"--config", writeFile(t, example)}, envOf(nil)); err != nil {
		t.Errorf("the example config file: %v", err)
	} else if _, err := f.config(); err != nil || f.cfg.MaxConcurrent != 4 {
		t.Errorf("the example config file: %v", err)
	}
	for _, o := range newFlags().opts.list {
		if !strings.Contains(want, "`--"+o.name+"`") || !strings.Contains(want, "`"+o.env()+"`") {
			t.Errorf("the docs lack --%s", o.name)
		}
	}
}

// With --log-format json every record is one JSON object, those of the
// standard log package and of gRPC included.
func TestJSONLogs(t *testing.T) {
	var b strings.Builder
	logger := newLogger(&b, "json", slog.LevelInfo)
	logger.Info("hello", "n", 1)
	slogWriter{logger, slog.LevelError}.Write([]byte("ERROR: grpc said something\n"))
	prev := slog.Default()
	slog.SetDefault(logger)
	log.Print("from the log package")
	slog.SetDefault(prev)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), b.String())
	}
	for _, line := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil || v["msg"] == nil || v["level"] == nil {
			t.Errorf("not a JSON record: %q (%v)", line, err)
		}
	}
	b.Reset()
	newLogger(&b, "text", slog.LevelInfo).Info("hello")
	if !strings.Contains(b.String(), `msg=hello`) {
		t.Errorf("text log: %q", b.String())
	}
}

// The master key from the environment is the key; given also as a file,
// it is refused; a bad one names the setting without showing it.
func TestMasterKeySetting(t *testing.T) {
	key := strings.Repeat("ab", 32)
	c, _ := loadConfig(t, "", map[string]string{"AIRLOCK_MASTER_KEY": key})
	if c.Keep.MasterKey == nil || c.Keep.MasterKey.ID() == "" {
		t.Fatalf("AIRLOCK_MASTER_KEY not used: %+v", c.Keep)
	}
	for name, env := range map[string]map[string]string{
		"both": {"AIRLOCK_MASTER_KEY": key, "AIRLOCK_MASTER_KEY_FILE": "/etc/airlock/master.key"},
		"bad":  {"AIRLOCK_MASTER_KEY": "not-a-key-secretvalue"},
	} {
		f := newFlags()
		if _, err := f.load(nil, envOf(env)); err != nil {
			t.Fatal(err)
		}
		_, err := f.config()
		if err == nil || !strings.Contains(err.Error(), "--master-key") || strings.Contains(err.Error(), "secretvalue") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
