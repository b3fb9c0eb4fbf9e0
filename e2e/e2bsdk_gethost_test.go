package e2e_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestE2BSDKGetHost runs E2B's published JavaScript SDK, unchanged,
// against airlockd with --preview-domain: the domain of the sandboxes
// it answers is the preview domain, so getHost(port) is the Host form of
// a preview URL. A server started in the sandbox through the SDK is
// fetched at that host (resolved to airlockd's loopback address by the
// request's own lookup, never DNS) with the sandbox's traffic token and
// with the key; no credential, a forged token, another tenant's key and
// (after it is revoked) the key the sandbox was made with are refused
// with problems. See e2bsdk/gethost.mjs.
func TestE2BSDKGetHost(t *testing.T) {
	node, npm := requireNode(t)
	n := newTestNode(t, nodeOptions{name: "e2bhost", images: []string{"python-ds"}})
	pkg := filepath.Join(n.dir, "sdk")
	if err := os.Mkdir(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	installed := make(chan struct{})
	go func() { defer close(installed); installSDK(t, npm, pkg) }()
	const domain = "e2b-preview.localhost"
	d := n.start(append(quiet, "--preview-domain", domain, "--abuse=false")...)
	keyA := newTenantKey(t, n.dir, "gethost-a", airlock.NewE2BAPIKey)
	keyB := newTenantKey(t, n.dir, "gethost-b", airlock.NewE2BAPIKey)
	<-installed
	if t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "gethost.mjs")
	cmd.Dir = pkg
	cmd.Env = append(os.Environ(),
		"E2B_API_URL="+d.url, "E2B_SANDBOX_URL="+d.url, "E2B_API_KEY="+keyA,
		"AIRLOCK_OTHER_KEY="+keyB, "AIRLOCK_PREVIEW_DOMAIN="+domain, "E2B_DEBUG=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("gethost.mjs:\n%s", out.String())
	if err != nil || !strings.Contains(out.String(), "ok: all checks passed") {
		t.Fatalf("the E2B SDK getHost script failed: %v", err)
	}
}
