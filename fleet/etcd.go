package fleet

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/airlockhq/airlock"
)

// EtcdConfig says how a node reaches etcd: its members, and the client
// TLS and user a secured cluster asks for.
type EtcdConfig struct {
	Endpoints []string // client URLs, http:// or https://
	// CAFile verifies the members' certificates (https endpoints); the
	// system's roots if empty.
	CAFile string
	// CertFile and KeyFile are this node's client certificate, for a
	// cluster that requires one (--client-cert-auth); both or neither.
	CertFile, KeyFile string
	// Username and Password authenticate to a cluster with auth enabled.
	Username, Password string
	DialTimeout        time.Duration // 5 s if zero
}

// Validate reports whether c can be used.
func (c EtcdConfig) Validate() error {
	if len(c.Endpoints) == 0 {
		return airlock.Errorf(airlock.EINVALID, "fleet: at least one etcd endpoint is required")
	}
	secure := false
	for _, e := range c.Endpoints {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return airlock.Errorf(airlock.EINVALID, "fleet: etcd endpoint must be http(s)://host:port, not %q", e)
		}
		secure = secure || u.Scheme == "https"
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return airlock.Errorf(airlock.EINVALID, "fleet: the etcd client certificate needs both its certificate and its key")
	}
	if !secure && (c.CAFile != "" || c.CertFile != "") {
		return airlock.Errorf(airlock.EINVALID, "fleet: etcd TLS options need https:// endpoints")
	}
	if (c.Username == "") != (c.Password == "") {
		return airlock.Errorf(airlock.EINVALID, "fleet: the etcd user needs both its name and its password")
	}
	return nil
}

// Client connects to etcd as c says (the connection is made lazily; the
// first request fails if etcd cannot be reached).
func (c EtcdConfig) Client() (*clientv3.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cfg := clientv3.Config{
		Endpoints:   c.Endpoints,
		DialTimeout: c.DialTimeout,
		Username:    c.Username,
		Password:    c.Password,
		Logger:      zap.NewNop(),
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	secure := false
	for _, e := range c.Endpoints {
		secure = secure || strings.HasPrefix(e, "https://")
	}
	if secure {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.CAFile != "" {
			pem, err := os.ReadFile(c.CAFile)
			if err != nil {
				return nil, fmt.Errorf("fleet: etcd CA: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, airlock.Errorf(airlock.EINVALID, "fleet: etcd CA file %s holds no PEM certificate", c.CAFile)
			}
			tc.RootCAs = pool
		}
		if c.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("fleet: etcd client certificate: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		cfg.TLS = tc
	}
	return clientv3.New(cfg)
}
