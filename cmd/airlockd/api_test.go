package main

import (
	"flag"
	"net"
	"strings"
	"testing"
)

func TestLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true,
		"127.0.0.2:8080": true,
		"[::1]:8080":     true,
		"0.0.0.0:8080":   false,
		"[::]:8080":      false,
		"10.0.0.7:8080":  false,
		"192.0.2.1:80":   false,
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := loopbackOnly(a); got != want {
			t.Errorf("loopbackOnly(%s) = %v, want %v", addr, got, want)
		}
	}
	if loopbackOnly(&net.UnixAddr{Name: "/run/airlock.sock", Net: "unix"}) {
		t.Error("a unix socket counted as loopback")
	}
}

// The flags take precedence over the environment, and bad values are
// refused before airlockd does anything.
func TestAPIOptions(t *testing.T) {
	parse := func(args ...string) (apiOptions, error) {
		var o apiOptions
		fs := flag.NewFlagSet("airlockd", flag.ContinueOnError)
		o.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return o, o.resolve()
	}
	t.Setenv("AIRLOCK_PUBLIC_URL", "https://env.example.com/base")
	t.Setenv("AIRLOCK_METRICS_KEY", "env-metrics-key-0123456789")
	o, err := parse()
	if err != nil || o.publicURL != "https://env.example.com/base" || o.metricsKey != "env-metrics-key-0123456789" {
		t.Errorf("from the environment: %+v, %v", o, err)
	}
	o, err = parse("--public-url", "https://flag.example.com/", "--metrics-key", "flag-metrics-key-0123456789")
	if err != nil || o.publicURL != "https://flag.example.com/" || o.metricsKey != "flag-metrics-key-0123456789" {
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
	var o2 apiOptions
	fs := flag.NewFlagSet("airlockd", flag.ContinueOnError)
	o2.register(fs)
	var help strings.Builder
	fs.SetOutput(&help)
	fs.PrintDefaults()
	if strings.Contains(help.String(), "env-metrics-key") {
		t.Errorf("-help shows the metrics key:\n%s", help.String())
	}
}

// --store: SQLite by default, a postgres:// URL from the flag or the
// environment; anything else is refused before airlockd does anything,
// without echoing what may be a password.
func TestStoreOptions(t *testing.T) {
	parse := func(env string, args ...string) (storeOptions, error) {
		t.Setenv("AIRLOCK_STORE", env)
		var o storeOptions
		fs := flag.NewFlagSet("airlockd", flag.ContinueOnError)
		o.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return o, o.resolve()
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
			if err != nil || o.store != tt.want || o.postgres() != tt.postgres {
				t.Errorf("got %q (postgres %v), %v; want %q (postgres %v)", o.store, o.postgres(), err, tt.want, tt.postgres)
			}
		})
	}
}
