package main

import (
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/airlockhq/airlock/api/rest"
)

// apiOptions are the operator's settings of the HTTP API.
type apiOptions struct {
	publicURL  string
	metricsKey string
}

func (o *apiOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.publicURL, "public-url", "", "absolute http(s) URL clients reach the API by, with an optional base path (e.g. https://airlock.example.com/base); artifact URLs are built from it instead of the request's Host (env AIRLOCK_PUBLIC_URL)")
	// The key's default is not taken from the environment here, so that
	// -help never prints it.
	fs.StringVar(&o.metricsKey, "metrics-key", "", "bearer key GET /metrics requires; without one, /metrics is open only when --listen is a loopback address (env AIRLOCK_METRICS_KEY)")
}

// resolve fills unset options from the environment and checks them, so a
// bad value stops airlockd before it does anything.
func (o *apiOptions) resolve() error {
	if o.publicURL == "" {
		o.publicURL = os.Getenv("AIRLOCK_PUBLIC_URL")
	}
	if o.metricsKey == "" {
		o.metricsKey = os.Getenv("AIRLOCK_METRICS_KEY")
	}
	if o.publicURL != "" {
		if _, err := rest.ParsePublicURL(o.publicURL); err != nil {
			return fmt.Errorf("--public-url: %w", err)
		}
	}
	if o.metricsKey != "" {
		if err := rest.ValidateMetricsKey(o.metricsKey); err != nil {
			return fmt.Errorf("--metrics-key: %w", err)
		}
	}
	return nil
}

// loopbackOnly reports whether a listener's address is a loopback
// address (127.0.0.0/8 or ::1), so only this host can reach it.
func loopbackOnly(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
