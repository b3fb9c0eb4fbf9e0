package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/seal"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/sqlite"
)

// Environment variables and defaults shared by the subcommands.
const (
	envURL      = "AIRLOCK_URL"
	envAPIKey   = "AIRLOCK_API_KEY"
	envStateDir = "AIRLOCK_STATE_DIR"

	fallbackURL      = "http://127.0.0.1:8080"
	fallbackStateDir = "/var/lib/airlock"

	defaultKeyFile = "default.key" // in the state dir
	databaseFile   = "airlock.db"  // in the state dir
	maxKeyFileSize = 4 << 10
)

// stdio is where a subcommand reads and writes, so tests can capture it.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

func osStdio() stdio { return stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr} }

// newFlagSet returns a flag set that prints usageText (and the parse error)
// to w instead of the flag package's generated listing.
func newFlagSet(name, usageText string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() { fmt.Fprint(w, usageText) }
	return fs
}

// parseArgs parses flags anywhere among the arguments ("tenant create NAME
// --state-dir DIR" as well as "--state-dir DIR NAME"); "--" ends the flags.
// It returns the positional arguments in order.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usageError reports a command-line mistake: it prints the message and a
// hint, and exits 2.
func usageError(w io.Writer, cmd string, format string, args ...any) error {
	fmt.Fprintf(w, "airlock %s: %s\nRun 'airlock %s -h' for usage.\n", cmd, fmt.Sprintf(format, args...), cmd)
	return exitError{exitUsage}
}

// flagErr turns a parse error into an exit: 0 for -h, 2 otherwise (the
// flag package has already printed the error and the usage).
func flagErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return exitError{0}
	}
	return exitError{exitUsage}
}

// envOr returns the environment variable, or def if it is unset or empty.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// stateDirDefault is $AIRLOCK_STATE_DIR or /var/lib/airlock.
func stateDirDefault() string { return envOr(envStateDir, fallbackStateDir) }

// serverFlags are --url, --key and --profile, shared by the commands
// that call a server with a tenant's key.
type serverFlags struct {
	url, key, profile string

	loaded bool
	prof   *profileEntry
	err    error
}

func (s *serverFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.url, "url", "", "server URL")
	fs.StringVar(&s.key, "key", "", "API key")
	fs.StringVar(&s.profile, "profile", "", "profile name")
}

// loadProfile reads the profile once: the one --profile or
// $AIRLOCK_PROFILE names, else the current one (none is not an error).
func (s *serverFlags) loadProfile() (*profileEntry, error) {
	if !s.loaded {
		s.loaded = true
		ps, err := loadProfiles()
		if err == nil {
			_, s.prof, err = ps.pick(s.profile)
		}
		s.err = err
	}
	return s.prof, s.err
}

// serverURL is --url, else $AIRLOCK_URL, else the profile's, else the
// local default.
func (s *serverFlags) serverURL() string {
	p, _ := s.loadProfile()
	if p == nil {
		p = &profileEntry{}
	}
	return firstOf(s.url, os.Getenv(envURL), p.URL, fallbackURL)
}

// apiKey is --key, else $AIRLOCK_API_KEY, else the profile's, else the
// state dir's default.key if it can be read, else "".
func (s *serverFlags) apiKey() string {
	p, _ := s.loadProfile()
	if p == nil {
		p = &profileEntry{}
	}
	if k := firstOf(s.key, os.Getenv(envAPIKey), p.APIKey); k != "" {
		return k
	}
	return readKeyFile(filepath.Join(stateDirDefault(), defaultKeyFile))
}

// readKeyFile returns the trimmed contents of a small key file, or "".
func readKeyFile(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// client returns an API client for the flags; hc may be nil. A profile
// that was asked for and does not exist is an error.
func (s *serverFlags) client(hc *http.Client) (*client.Client, error) {
	if _, err := s.loadProfile(); err != nil {
		return nil, setupError{err}
	}
	c, err := client.New(client.Config{
		BaseURL:    s.serverURL(),
		APIKey:     s.apiKey(),
		HTTPClient: hc,
		UserAgent:  "airlock-cli/1",
	})
	if err != nil {
		return nil, setupError{err}
	}
	return c, nil
}

// setupError is a failure before any request: a missing profile, a bad
// URL. It is reported as it is, not as a network error.
type setupError struct{ error }

func (e setupError) Unwrap() error { return e.error }

// newID returns a new random ID: a ULID (sortable by time, 80 random bits
// from crypto/rand), the same form the sqlite store makes.
func newID() string {
	return ulid.MustNew(ulid.Timestamp(time.Now()), rand.Reader).String()
}

// adminStore is what the operator's commands read and change in the
// metadata store.
type adminStore interface {
	airlock.Store
	airlock.SessionStore
	airlock.QuotaStore
	airlock.AbuseStore
	airlock.ExecutionCounter
	seal.KeyStore
	VolumeMiB(ctx context.Context, tenantID string) (int64, error)
	SetTenantGuard(ctx context.Context, tenantID string, p airlock.GuardPolicy) error
}

var _ adminStore = (*store.DB)(nil) // on SQLite and on PostgreSQL

// envStore names the PostgreSQL database of nodes run with --store, as
// airlockd reads it: the commands then work on it instead of a state
// directory's SQLite file.
const envStore = "AIRLOCK_STORE"

// openStore opens the node's database: the PostgreSQL database $AIRLOCK_STORE
// names when it is a postgres:// URL, else the SQLite file in stateDir.
// With mustExist, a missing SQLite database is an error instead of being
// created, so a mistyped --state-dir does not leave a stray empty store
// behind.
func openStore(ctx context.Context, stateDir string, mustExist bool) (adminStore, error) {
	if u := os.Getenv(envStore); strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		db, err := postgres.Open(ctx, postgres.Config{DSN: u})
		if err != nil {
			return nil, fmt.Errorf("$%s: %w", envStore, err)
		}
		return db, nil
	}
	path := filepath.Join(stateDir, databaseFile)
	if mustExist {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no database at %s (wrong --state-dir or $%s? 'airlock tenant create' makes one)", path, envStateDir)
		}
	}
	return sqlite.Open(ctx, sqlite.Config{Path: path})
}
