package image_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/service/image"
)

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func privateKeyPEM(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

func (e *env) builderWith(t *testing.T, sc *secretscan.Scanner) *image.Builder {
	t.Helper()
	b, err := image.NewBuilder(image.Config{
		StateDir:    e.state,
		AgentPath:   e.agent,
		Mirror:      "http://mirror.invalid/debian",
		Progress:    e.progress,
		Debootstrap: filepath.Join(e.bin, "debootstrap"),
		Secrets:     sc,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantRefused checks a build error: the secret-in-image problem naming
// where, never showing secret, with nothing published.
func wantRefused(t *testing.T, e *env, err error, where, secret string) {
	t.Helper()
	var ae *airlock.Error
	if !errors.As(err, &ae) || ae.Code != airlock.EUNPROCESSABLE || ae.Type != image.ProblemSecret || !errors.Is(err, secretscan.ErrFound) {
		t.Fatalf("Build = %v, want a %s problem", err, image.ProblemSecret)
	}
	if !strings.Contains(err.Error(), where) {
		t.Errorf("the refusal does not name %s: %v", where, err)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(e.progress.String(), secret) {
		t.Errorf("the refusal shows the secret: %v", err)
	}
	st, _ := image.NewStore(image.StoreConfig{StateDir: e.state})
	if list, _ := st.List(context.Background()); len(list) > 0 {
		t.Errorf("published %+v", list)
	}
	t.Logf("%v", err)
}

// TestBuildRefusesSpecSecrets: a credential in a spec's files or
// environment, or a value the host holds (a broker credential), refuses
// the build before debootstrap runs.
func TestBuildRefusesSpecSecrets(t *testing.T) {
	broker := "brk-" + randomHex(16) // no pattern matches it: only the exact value does
	known := &secretscan.Known{}
	known.Add("broker credential of scope github", []byte(broker))
	sc := secretscan.Default().WithKnown(known)
	token := "ghp_" + strings.ToUpper(randomHex(9))[:18] + randomHex(9)
	generic := randomHex(8) + "QzX" + randomHex(6)
	for _, c := range []struct {
		name, where, secret string
		edit                func(*airlock.ImageSpec)
	}{
		{"file with a private key", "spec file /root/.ssh/id_ecdsa:1", "", func(s *airlock.ImageSpec) {
			s.Files = map[string]string{"/root/.ssh/id_ecdsa": privateKeyPEM(t)}
		}},
		{"file with a password", "spec file /etc/app/app.ini:2", generic, func(s *airlock.ImageSpec) {
			s.Files = map[string]string{"/etc/app/app.ini": "[db]\npassword = " + generic + "\n"}
		}},
		{"file with the broker's credential", "spec file /etc/app/env:1", broker, func(s *airlock.ImageSpec) {
			s.Files = map[string]string{"/etc/app/env": "X=" + broker + "\n"}
		}},
		{"env with a token", "env GH", token, func(s *airlock.ImageSpec) {
			s.Env["GH"] = token
		}},
		{"env with a secret name", "env DB_PASSWORD", generic, func(s *airlock.ImageSpec) {
			s.Env["DB_PASSWORD"] = generic
		}},
		{"env with the broker's credential", "env UPSTREAM", broker, func(s *airlock.ImageSpec) {
			s.Env["UPSTREAM"] = broker
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, fakeDebootstrap)
			s := spec(t, "base")
			c.edit(&s)
			_, err := e.builderWith(t, sc).Build(context.Background(), s)
			secret := c.secret
			if secret == "" {
				secret = strings.Split(s.Files["/root/.ssh/id_ecdsa"], "\n")[1]
			}
			wantRefused(t, e, err, c.where, secret)
			if calls := e.calls(t); len(calls) != 0 {
				t.Errorf("debootstrap ran for a refused spec: %q", calls)
			}
		})
	}
}

// TestBuildRefusesRootfsSecret: a key the packages brought (here the fake
// debootstrap) refuses the image before it is published; the allow-list
// lets a known test key through, reported.
func TestBuildRefusesRootfsSecret(t *testing.T) {
	key := privateKeyPEM(t)
	script := fakeDebootstrap + "\nmkdir -p \"$target/root/.ssh\" \"$target/usr/share/pkg/tests\"\n" +
		"cat > \"$target/root/.ssh/id_ecdsa\" <<'EOF'\n" + key + "EOF\n" +
		"cp \"$target/root/.ssh/id_ecdsa\" \"$target/usr/share/pkg/tests/key.pem\"\n"
	e := newEnv(t, script)
	allow := []secretscan.Allow{{Path: "/usr/share/pkg/tests/*.pem", Rules: []string{secretscan.RulePrivateKey}, Reason: "the package's test key"}}
	sc, err := secretscan.New(secretscan.Config{Allow: allow})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.builderWith(t, sc).Build(context.Background(), spec(t, "base"))
	wantRefused(t, e, err, "/root/.ssh/id_ecdsa:1 (offset 0): private-key", strings.Split(key, "\n")[1])
	if strings.Contains(err.Error(), "/usr/share/pkg/tests/key.pem") {
		t.Errorf("the allowed key refused the image: %v", err)
	}
	if !strings.Contains(e.progress.String(), "allowed: /usr/share/pkg/tests/key.pem:1") {
		t.Errorf("the allowed key is not reported:\n%s", e.progress)
	}
	if got := entries(t, filepath.Join(e.state, "images", ".tmp")); len(got) > 0 {
		t.Errorf("left temp dirs %q", got)
	}
}

// TestBuildRefusesAgentSecret: the rootfs scan covers everything
// published, the agent binary included.
func TestBuildRefusesAgentSecret(t *testing.T) {
	e := newEnv(t, fakeDebootstrap)
	metrics := randomHex(20)
	writeELF(t, e.agent, "agent built with "+metrics, false)
	known := &secretscan.Known{}
	known.Add("airlockd metrics key", []byte(metrics))
	_, err := e.builderWith(t, secretscan.Default().WithKnown(known)).Build(context.Background(), spec(t, "base"))
	wantRefused(t, e, err, image.AgentPath+" (offset", metrics)
}

func TestBuildSpecFiles(t *testing.T) {
	e := newEnv(t, fakeDebootstrap)
	s := spec(t, "base")
	s.Files = map[string]string{"/etc/app/settings.toml": "mode = \"fast\"\n"}
	img, err := e.builder(t).Build(context.Background(), s)
	if err != nil {
		t.Fatalf("Build: %v\n%s", err, e.progress)
	}
	p := filepath.Join(img.Rootfs, "etc/app/settings.toml")
	if got := readFile(t, p); got != s.Files["/etc/app/settings.toml"] {
		t.Errorf("file = %q", got)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode())
	}
	if img.Hash == image.Hash(spec(t, "base"), mustSum(t, e.agent)) {
		t.Error("the files do not change the image's hash")
	}
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(img.Rootfs), image.ManifestFile))
	if !strings.Contains(string(b), `"secret_scan"`) {
		t.Errorf("manifest without the scan: %s", b)
	}

	// A path through a symlink of the image is refused.
	e2 := newEnv(t, fakeDebootstrap+"\nln -s /etc \"$target/etclink\"\n")
	s.Files = map[string]string{"/etclink/x": "y"}
	if _, err := e2.builder(t).Build(context.Background(), s); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("Build through a symlink = %v", err)
	}
}

func mustSum(t *testing.T, p string) string {
	t.Helper()
	s, err := image.FileSHA256(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestValidateSpecFiles(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"relative":  {"etc/x": ""},
		"unclean":   {"/etc/../x": ""},
		"root":      {"/": ""},
		"workspace": {"/workspace/x": ""},
		"agent":     {image.AgentPath: ""},
		"proc":      {"/proc/x": ""},
		"too large": {"/etc/x": strings.Repeat("x", image.MaxSpecFileBytes+1)},
	} {
		s := spec(t, "base")
		s.Files = files
		if err := image.ValidateSpec(s); airlock.ErrorCode(err) != airlock.EINVALID {
			t.Errorf("%s: ValidateSpec = %v, want EINVALID", name, err)
		}
	}
}
