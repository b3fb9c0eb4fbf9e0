package broker

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// Scope is one thing sandbox code may do with a credential it never sees:
// call Upstream with the listed methods on paths that match Paths.
type Scope struct {
	// Name is how code calls it: http://broker.airlock.internal/<name>/...
	Name string `json:"name"`
	// Upstream is the base URL calls go to (https, or http for an
	// upstream on a trusted network); the path after the scope name is
	// appended to its path.
	Upstream string `json:"upstream"`
	// Methods allowed, e.g. ["GET"].
	Methods []string `json:"methods"`
	// Paths are patterns of the path after the scope name: "/" separated
	// segments where "*" and other path.Match patterns match within one
	// segment, and a last segment "**" matches any rest (or none).
	Paths []string `json:"paths"`
	// Credential says where the secret comes from: a file read at every
	// call (so it can be rotated), or an environment variable of airlockd
	// read at start.
	Credential Credential `json:"credential"`
	// Header carries the credential upstream ("Authorization" if empty),
	// formatted by Format with {credential} replaced ("Bearer {credential}"
	// if empty).
	Header string `json:"header,omitempty"`
	Format string `json:"format,omitempty"`
	// StripResponseHeaders are removed from upstream's response on top of
	// the ones always removed (Set-Cookie, Authorization and any header
	// that carries the credential).
	StripResponseHeaders []string `json:"strip_response_headers,omitempty"`
	// CAFile adds a PEM bundle of roots for this upstream.
	CAFile string `json:"ca_file,omitempty"`
	// Tenants are granted the scope by this file (names or IDs), beside
	// the grants the operator keeps in the store (airlock admin tenant
	// set NAME --broker-scope SCOPE). No other tenant may use it.
	Tenants []string `json:"tenants,omitempty"`

	base    *url.URL
	methods map[string]bool
	secret  string // from the environment, read at start
	roots   *x509.CertPool
}

// Credential is where a scope's secret comes from: exactly one of File
// and Env.
type Credential struct {
	File string `json:"file,omitempty"`
	Env  string `json:"env,omitempty"`
}

// FileConfig is the operator's broker file (--broker-config).
type FileConfig struct {
	Scopes []Scope `json:"scopes"`
}

// LoadFile reads a broker config file.
func LoadFile(path string) ([]Scope, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	var fc FileConfig
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return nil, fmt.Errorf("broker: %s: %w", path, err)
	}
	return fc.Scopes, nil
}

// Grants is where the broker reads the operator's grants: the store.
type Grants interface {
	BrokerGrants(ctx context.Context, tenantID string) ([]string, error)
	TenantByID(ctx context.Context, id string) (*airlock.Tenant, error)
}

// Config configures a Broker.
type Config struct {
	Scopes []Scope
	// Grants are the grants kept in the store, read at every call (so a
	// grant taken back stops live sessions' calls at once); nil means
	// only the scopes' Tenants.
	Grants Grants
	// Record receives the audit event of every call; required.
	Record func(*airlock.EgressEvent)
	// LookupHost resolves upstream names; net.DefaultResolver if nil.
	LookupHost func(ctx context.Context, host string) ([]netip.Addr, error)
	// RootCAs are the roots upstream certificates are checked against;
	// the system's if nil.
	RootCAs *x509.CertPool
	// Getenv reads the environment (os.Getenv if nil).
	Getenv func(string) string
	// Timeout bounds one upstream call (30 s); MaxRequestBytes and
	// MaxResponseBytes bound the bodies (1 MiB, 64 MiB).
	Timeout          time.Duration
	MaxRequestBytes  int64
	MaxResponseBytes int64
	Logger           *slog.Logger
	Now              func() time.Time
}

// Validate fills defaults and checks every scope.
func (c *Config) Validate() error {
	if c.Record == nil {
		return errors.New("broker: an audit recorder is required")
	}
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = 1 << 20
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = 64 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	seen := map[string]bool{}
	for i := range c.Scopes {
		sc := &c.Scopes[i]
		if err := sc.prepare(c); err != nil {
			return err
		}
		if seen[sc.Name] {
			return fmt.Errorf("broker: scope %q is configured twice", sc.Name)
		}
		seen[sc.Name] = true
	}
	return nil
}

func (sc *Scope) prepare(c *Config) error {
	if !airlock.ValidScopeName(sc.Name) {
		return fmt.Errorf("broker: scope name %q: 1 to 64 letters, digits, '.', '_' or '-'", sc.Name)
	}
	u, err := url.Parse(sc.Upstream)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("broker: scope %s: upstream must be an http(s) URL without user, query or fragment", sc.Name)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	sc.base = u
	if len(sc.Methods) == 0 {
		return fmt.Errorf("broker: scope %s: list the allowed methods", sc.Name)
	}
	sc.methods = map[string]bool{}
	for _, m := range sc.Methods {
		m = strings.ToUpper(m)
		switch m {
		case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		default:
			return fmt.Errorf("broker: scope %s: method %q is not allowed", sc.Name, m)
		}
		sc.methods[m] = true
	}
	if len(sc.Paths) == 0 {
		return fmt.Errorf("broker: scope %s: list the allowed path patterns", sc.Name)
	}
	for _, p := range sc.Paths {
		if err := checkPattern(p); err != nil {
			return fmt.Errorf("broker: scope %s: path pattern %q: %w", sc.Name, p, err)
		}
	}
	switch {
	case (sc.Credential.File == "") == (sc.Credential.Env == ""):
		return fmt.Errorf("broker: scope %s: give the credential as exactly one of file and env", sc.Name)
	case sc.Credential.Env != "":
		sc.secret = c.Getenv(sc.Credential.Env)
		if sc.secret == "" {
			return fmt.Errorf("broker: scope %s: environment variable %s is empty", sc.Name, sc.Credential.Env)
		}
	default:
		if _, err := readSecret(sc.Credential.File); err != nil {
			return fmt.Errorf("broker: scope %s: %w", sc.Name, err)
		}
	}
	if sc.Header == "" {
		sc.Header = "Authorization"
	}
	sc.Header = http.CanonicalHeaderKey(sc.Header)
	if sc.Format == "" {
		sc.Format = "Bearer {credential}"
	}
	if !strings.Contains(sc.Format, "{credential}") {
		return fmt.Errorf("broker: scope %s: format must contain {credential}", sc.Name)
	}
	if sc.CAFile != "" {
		pem, err := os.ReadFile(sc.CAFile)
		if err != nil {
			return fmt.Errorf("broker: scope %s: %w", sc.Name, err)
		}
		pool := c.RootCAs
		if pool == nil {
			if pool, err = x509.SystemCertPool(); err != nil {
				pool = x509.NewCertPool()
			}
		}
		pool = pool.Clone()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("broker: scope %s: no certificates in %s", sc.Name, sc.CAFile)
		}
		sc.roots = pool
	}
	return nil
}

// readSecret reads a credential file: its content without surrounding
// white space. It must be owned by root and not readable by others.
func readSecret(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("credential file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("credential file %s must not be readable by group or others (mode %o)", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("credential file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("credential file %s is empty", path)
	}
	return s, nil
}

// credential returns the scope's secret now.
func (sc *Scope) credential() (string, error) {
	if sc.Credential.Env != "" {
		return sc.secret, nil
	}
	return readSecret(sc.Credential.File)
}
