package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/service/broker"
	"github.com/airlockhq/airlock/service/image"
)

// hostSecretFlags say where the CLI finds the values the host holds that
// no image may contain, as airlockd would: its key files in the state
// directory, AIRLOCK_METRICS_KEY, and the broker's credentials.
type hostSecretFlags struct {
	brokerConfig string
}

func (h *hostSecretFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&h.brokerConfig, "broker-config", "", "airlockd's broker config: its credentials (files, or variables of this environment) may not appear in an image")
}

// known returns the host's secret values for a state directory.
func (h *hostSecretFlags) known(stateDir string) (*secretscan.Known, error) {
	k := &secretscan.Known{}
	k.AddStateDir(stateDir)
	if v := os.Getenv("AIRLOCK_METRICS_KEY"); v != "" {
		k.Add("airlockd metrics key", []byte(v))
	}
	if h.brokerConfig != "" {
		scopes, err := broker.LoadFile(h.brokerConfig)
		if err != nil {
			return nil, err
		}
		bk, err := broker.New(broker.Config{Scopes: scopes, Record: func(*airlock.EgressEvent) {}})
		if err != nil {
			return nil, err
		}
		k.AddSource(func() []secretscan.Secret {
			var out []secretscan.Secret
			for scope, v := range bk.Credentials() {
				out = append(out, secretscan.Secret{Name: "broker credential of scope " + scope, Value: []byte(v)})
			}
			return out
		})
	}
	return k, nil
}

const imageScanUsage = "usage: airlock image scan [--state-dir DIR] [--broker-config FILE] NAME...   (NAME may be \"all\")"

// runImageScan scans built images for credentials as a build does
// before publishing, and prints what it found, allowed and skipped.
func runImageScan(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("airlock image scan", flag.ContinueOnError)
	stateDir := fs.String("state-dir", stateDirDefault(), "node state directory ($AIRLOCK_STATE_DIR)")
	var hs hostSecretFlags
	hs.register(fs)
	names, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(names) == 0 {
		fmt.Fprintln(os.Stderr, imageScanUsage)
		return exitError{2}
	}
	if len(names) == 1 && names[0] == "all" {
		names = image.Names()
	}
	known, err := hs.known(*stateDir)
	if err != nil {
		return err
	}
	st, err := image.NewStore(image.StoreConfig{StateDir: *stateDir})
	if err != nil {
		return err
	}
	sc := secretscan.Default().WithKnown(known)
	refused := false
	for _, n := range names {
		img, err := st.Resolve(ctx, n)
		if err != nil {
			return fmt.Errorf("image %s: %w", n, err)
		}
		rep, err := sc.ScanTree(ctx, img.Rootfs, secretscan.ModeFiles)
		if err != nil {
			return fmt.Errorf("scan %s: %w", n, err)
		}
		special := 0
		for _, s := range rep.Skipped {
			if s.Special {
				special++
				continue
			}
			fmt.Printf("%s: not scanned: %s: %s\n", n, s.Path, s.Reason)
		}
		for _, f := range rep.Findings {
			fmt.Printf("%s: %s\n", n, f)
		}
		fmt.Printf("%s %s: %d files, %s in %.2fs (%.0f MiB/s), %d findings (%d allowed), %d special files\n",
			n, image.Short(img.Hash), rep.Files, image.HumanSize(rep.Bytes), rep.Duration.Seconds(),
			float64(rep.Bytes)/(1<<20)/max(rep.Duration.Seconds(), 1e-9), len(rep.Findings), len(rep.Allowed()), special)
		if err := rep.Err("image " + n); err != nil {
			refused = true
		}
	}
	if refused {
		return errors.New("an image holds a credential: it would not be published")
	}
	return nil
}
