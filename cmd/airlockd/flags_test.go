package main

import (
	"os"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/node"
)

// The flags take precedence over the environment, and bad values are
// refused before airlockd does anything.
func TestAPIOptions(t *testing.T) {
	parse := func(args ...string) (node.APIConfig, error) {
		f, err := parseFlags(args)
		if err != nil {
			t.Fatal(err)
		}
		c, err := f.config()
		return c.API, err
	}
	t.Setenv("AIRLOCK_PUBLIC_URL", "https://env.example.com/base")
	t.Setenv("AIRLOCK_METRICS_KEY", "env-metrics-key-0123456789")
	o, err := parse()
	if err != nil || o.PublicURL != "https://env.example.com/base" || o.MetricsKey != "env-metrics-key-0123456789" {
		t.Errorf("from the environment: %+v, %v", o, err)
	}
	o, err = parse("--public-url", "https://flag.example.com/", "--metrics-key", "flag-metrics-key-0123456789")
	if err != nil || o.PublicURL != "https://flag.example.com/" || o.MetricsKey != "flag-metrics-key-0123456789" {
		t.Errorf("from the flags: %+v, %v", o, err)
	}
	for _, args := range [][]string{
		{"--public-url", "airlock.example.com"},
		{"--public-url", "https://airlock.example.com/?x=1"},
		{"--public-url", "https://airlock.example.com/#x"},
		{"--public-url", "ftp://airlock.example.com"},
		{"--metrics-key", "short"},
		{"--metrics-key", "with a space in the key"},
	} {
		if _, err := parse(args...); err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: %v, want an error naming the flag", args, err)
		}
	}
	// -help must not print a key taken from the environment.
	var help strings.Builder
	newFlags().usage(&help)
	if strings.Contains(help.String(), "env-metrics-key") {
		t.Errorf("-help shows the metrics key:\n%s", help.String())
	}
}

// --store: SQLite by default, a postgres:// URL from the flag or the
// environment; anything else is refused before airlockd does anything,
// without echoing what may be a password.
func TestStoreOptions(t *testing.T) {
	parse := func(env string, args ...string) (node.StoreConfig, error) {
		t.Setenv("AIRLOCK_STORE", env)
		f, err := parseFlags(args)
		if err != nil {
			t.Fatal(err)
		}
		c, err := f.config()
		return c.Store, err
	}
	tests := []struct {
		name, env string
		args      []string
		want      string // the store, or "" for an error
		postgres  bool
	}{
		{"default", "", nil, "sqlite", false},
		{"sqlite", "", []string{"--store", "sqlite"}, "sqlite", false},
		{"url", "", []string{"--store", "postgres://airlock@db:5432/airlock"}, "postgres://airlock@db:5432/airlock", true},
		{"postgresql scheme", "", []string{"--store", "postgresql://db/airlock"}, "postgresql://db/airlock", true},
		{"from the environment", "postgres://env@db/airlock", nil, "postgres://env@db/airlock", true},
		{"flag over environment", "postgres://env@db/airlock", []string{"--store", "sqlite"}, "sqlite", false},
		{"unknown", "", []string{"--store", "mysql://u:hunter2@db/x"}, "", false},
		{"key value", "", []string{"--store", "host=db password=hunter2"}, "", false},
		{"bad url", "", []string{"--store", "postgres://u:hunter2@db/x?connect_timeout=soon"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(tt.env, tt.args...)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("accepted %+v", o)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("the error shows the password: %v", err)
				}
				return
			}
			postgres := strings.HasPrefix(o.URL, "postgres")
			if err != nil || o.URL != tt.want || postgres != tt.postgres {
				t.Errorf("got %q (postgres %v), %v; want %q (postgres %v)", o.URL, postgres, err, tt.want, tt.postgres)
			}
		})
	}
}

// The fleet's etcd TLS and user options and its node ranges bind to
// node.FleetConfig; inconsistent ones are refused before airlockd does
// anything.
func TestFleetOptions(t *testing.T) {
	base := []string{"--etcd", "https://e1:2379, https://e2:2379", "--fleet-secret", "0123456789abcdef0123", "--advertise", "http://10.0.0.5:8080"}
	t.Setenv("AIRLOCK_ETCD_PASSWORD", "pw")
	f, err := parseFlags(append(base, "--etcd-ca", "/ca.pem", "--etcd-cert", "/c.pem", "--etcd-key", "/k.pem",
		"--etcd-user", "airlock", "--fleet-node-range", "10.0.0.0/24, 10.0.1.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.config()
	if err != nil {
		t.Fatal(err)
	}
	got := c.Fleet
	if len(got.Etcd) != 2 || got.Etcd[1] != "https://e2:2379" || got.EtcdCA != "/ca.pem" || got.EtcdCert != "/c.pem" || got.EtcdKey != "/k.pem" ||
		got.EtcdUser != "airlock" || got.EtcdPassword != "pw" || len(got.NodeRanges) != 2 || got.NodeRanges[1] != "10.0.1.0/24" {
		t.Errorf("fleet config %+v", got)
	}
	for name, extra := range map[string][]string{
		"bad range":     {"--fleet-node-range", "10.0.0.0/33"},
		"cert, no key":  {"--etcd-cert", "/c.pem"},
		"negative cpus": {"--fleet-cpus", "-1"},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := parseFlags(append(append([]string{}, base...), extra...))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.config(); err == nil {
				t.Errorf("%v accepted", extra)
			}
		})
	}
	t.Setenv("AIRLOCK_ETCD_PASSWORD", "")
	f, err = parseFlags(append(append([]string{}, base...), "--etcd-user", "airlock"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.config(); err == nil {
		t.Error("--etcd-user without AIRLOCK_ETCD_PASSWORD accepted")
	}
}

// parseFlags parses args as airlockd's command line, on a set of its own.
func parseFlags(args []string) (*flags, error) {
	f := newFlags()
	_, err := f.load(args, os.LookupEnv)
	return f, err
}
