package secretscan_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlockhq/airlock/internal/secretscan"
)

func TestScanEnv(t *testing.T) {
	host := rnd(alnum, 24)
	k := &secretscan.Known{}
	k.Add("broker credential of scope github", []byte(host))
	sc := secretscan.Default().WithKnown(k)
	for _, c := range []struct {
		kv   string
		rule string
	}{
		{"DB_PASSWORD=hunter2hunter2", secretscan.RuleSecretVariable},
		{"AWS_SECRET_ACCESS_KEY=" + rnd(alnum, 40), secretscan.RuleSecretVariable},
		{"GH=ghp_" + rnd(alnum, 36), secretscan.RuleGitHubToken},
		{"HARMLESS_NAME=" + host, secretscan.RuleHostSecret},
		{"PASSWORD_FILE=/run/secrets/db", ""},
		{"TOKEN=${TOKEN}", ""},
		{"API_TOKEN=short", ""},
		{"PASSWORD=changeme-please", ""},
		{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", ""},
		{"MPLBACKEND=Agg", ""},
		{"PYTHONDONTWRITEBYTECODE=1", ""},
	} {
		fs := sc.ScanEnv([]string{c.kv})
		name, value, _ := strings.Cut(c.kv, "=")
		if c.rule == "" {
			if len(fs) != 0 {
				t.Errorf("%s: found %v", name, fs)
			}
			continue
		}
		if len(fs) != 1 || fs[0].Rule != c.rule || fs[0].Where != "env "+name {
			t.Errorf("%s: findings %v, want one %s naming the variable", name, fs, c.rule)
			continue
		}
		if strings.Contains(fs[0].String(), value) {
			t.Errorf("%s: the finding shows the value: %s", name, fs[0])
		}
	}
}

// TestKnown: the host's values are found raw and encoded, in binary files
// too, whatever allow-list covers the file; short values are ignored and
// sources are read at each scan.
func TestKnown(t *testing.T) {
	bin := rndBytes(32)
	text := rnd(alnum, 30)
	var later []byte
	k := &secretscan.Known{}
	k.Add("signing key", bin)
	k.Add("metrics key", []byte(text))
	k.Add("too short", []byte("abc"))
	k.AddSource(func() []secretscan.Secret { return []secretscan.Secret{{Name: "rotated", Value: later}} })
	sc, err := secretscan.New(secretscan.Config{Known: k, Allow: []secretscan.Allow{{Path: "/**", Reason: "everything"}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{
		"raw binary":    append([]byte("\x00\x01"), bin...),
		"hex":           []byte("key=" + hex.EncodeToString(bin)),
		"hex upper":     []byte(strings.ToUpper(hex.EncodeToString(bin))),
		"base64":        []byte(base64.StdEncoding.EncodeToString(bin)),
		"base64url raw": []byte(base64.RawURLEncoding.EncodeToString(bin)),
		"text":          []byte("\x00memory " + text + " more"),
	} {
		fs := sc.ScanBytes("/f", content)
		if len(fs) == 0 || fs[0].Rule != secretscan.RuleHostSecret || fs[0].Allowed != "" {
			t.Errorf("%s: findings %v, want a host secret that no allow entry covers", name, fs)
		}
		for _, f := range fs {
			if strings.Contains(f.String(), text) || strings.Contains(f.String(), hex.EncodeToString(bin)) {
				t.Errorf("%s: the finding shows the value: %s", name, f)
			}
		}
	}
	if fs := sc.ScanBytes("/f", []byte("abc abc")); len(fs) != 0 {
		t.Errorf("a value shorter than %d bytes matched: %v", secretscan.MinSecretBytes, fs)
	}
	later = []byte(rnd(alnum, 20))
	if fs := sc.ScanBytes("/f", later); len(fs) != 1 || !strings.Contains(fs[0].Excerpt, "rotated") {
		t.Errorf("a source's current value: %v", fs)
	}
}

func TestStateDir(t *testing.T) {
	dir := t.TempDir()
	k := &secretscan.Known{}
	k.AddStateDir(dir)
	if n := len(k.Secrets()); n != 0 {
		t.Fatalf("%d secrets from an empty state directory", n)
	}
	key := rnd(alnum, 40)
	os.WriteFile(filepath.Join(dir, "default.key"), []byte(key+"\n"), 0o600)
	e2bKey := append([]byte("\n "), rndBytes(30)...) // binary: kept whole
	os.WriteFile(filepath.Join(dir, "e2b.key"), e2bKey, 0o600)
	got := k.Secrets()
	if len(got) != 2 {
		t.Fatalf("secrets %d, want 2 (default.key and e2b.key)", len(got))
	}
	for _, s := range got {
		if strings.Contains(s.Name, "e2b.key") && !bytes.Equal(s.Value, e2bKey) {
			t.Errorf("the binary key was changed: %x", s.Value)
		}
		if strings.Contains(s.Name, "default.key") && string(s.Value) != key {
			t.Errorf("the text key was not trimmed: %q", s.Value)
		}
	}
	fs := secretscan.Default().WithKnown(k).ScanBytes("/etc/motd", []byte("welcome "+key))
	if len(fs) != 1 || !strings.Contains(fs[0].Excerpt, "default.key") {
		t.Fatalf("findings %v, want the default key named", fs)
	}
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestScanTree: findings name the path in the tree, line and offset,
// across chunk boundaries; symlinks are not followed (least of all out
// of the tree), special files and files over the cap are listed as
// skipped, hard links read once, allowed findings kept but not refusing.
func TestScanTree(t *testing.T) {
	outside := t.TempDir()
	gh := "ghp_" + rnd(alnum, 36)
	writeFile(t, filepath.Join(outside, "host.env"), []byte("GH="+gh+"\n"))

	root := t.TempDir()
	// A token across the first 1 MiB chunk boundary, on line 3.
	big := bytes.Repeat([]byte("x"), 1<<20-10)
	big = append([]byte("a\nb\n"), big...)
	big = append(big, []byte(" "+gh+"\n")...)
	big = append(big, bytes.Repeat([]byte("y"), 3<<20)...)
	writeFile(t, filepath.Join(root, "var/big.log"), big)
	writeFile(t, filepath.Join(root, "etc/ok.conf"), []byte("nothing here\n"))
	writeFile(t, filepath.Join(root, "usr/share/test/keys/k.pem"), []byte(pemKey(t, "EC PRIVATE KEY")))
	writeFile(t, filepath.Join(root, "huge"), make([]byte, 2<<20))
	os.Symlink(filepath.Join(outside, "host.env"), filepath.Join(root, "etc/linked.env"))
	os.Symlink(outside, filepath.Join(root, "outside"))
	os.Link(filepath.Join(root, "var/big.log"), filepath.Join(root, "var/big.log.1"))
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}

	sc, err := secretscan.New(secretscan.Config{
		MaxFileBytes: 5 << 20,
		Allow:        []secretscan.Allow{{Path: "/usr/share/test/**", Rules: []string{secretscan.RulePrivateKey}, Reason: "test keys"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sc.ScanTree(context.Background(), root, secretscan.ModeFiles)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 2 {
		t.Fatalf("findings %v, want the token in big.log (once) and the allowed key", rep.Findings)
	}
	f := rep.Findings[0]
	if f.Where == "/usr/share/test/keys/k.pem" {
		f = rep.Findings[1]
	}
	if !strings.HasPrefix(f.Where, "/var/big.log") || f.Line != 3 || f.Offset != int64(4+1<<20-10+1) {
		t.Errorf("token found as %v, want /var/big.log:3 at offset %d", f, 4+1<<20-10+1)
	}
	if got := len(rep.Allowed()); got != 1 || rep.Allowed()[0].Allowed != "test keys" {
		t.Errorf("allowed %v", rep.Allowed())
	}
	var e *secretscan.FoundError
	if err := rep.Err("image x"); !errors.As(err, &e) || !errors.Is(err, secretscan.ErrFound) || len(e.Findings) != 1 {
		t.Errorf("refusal %v, want the one finding that is not allowed", err)
	}
	skipped := map[string]string{}
	for _, s := range rep.Skipped {
		skipped[s.Path] = s.Reason
	}
	if _, ok := skipped["/fifo"]; !ok || len(skipped) != 1 {
		t.Errorf("skipped %v, want the fifo alone", skipped)
	}

	sc2, _ := secretscan.New(secretscan.Config{MaxFileBytes: 1 << 20})
	rep, err = sc2.ScanTree(context.Background(), root, secretscan.ModeFiles)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/huge", "/var/big.log"} {
		found := false
		for _, s := range rep.Skipped {
			found = found || s.Path == p || (p == "/var/big.log" && s.Path == "/var/big.log.1")
		}
		if !found {
			t.Errorf("%s over the cap not listed as skipped: %v", p, rep.Skipped)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sc.ScanTree(ctx, root, secretscan.ModeFiles); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled scan: %v", err)
	}
}

// TestScanTreeMemory: a memory image is searched for the host's values
// and key patterns, not for loose assignments.
func TestScanTreeMemory(t *testing.T) {
	root := t.TempDir()
	host := rnd(alnum, 32)
	writeFile(t, filepath.Join(root, "pages.img"), []byte("API_TOKEN = \""+rnd(alnum, 32)+"\"\n"))
	writeFile(t, filepath.Join(root, "checkpoint.img"), []byte("\x00\x00env\x00X="+host+"\x00"))
	k := &secretscan.Known{}
	k.Add("airlockd metrics key", []byte(host))
	rep, err := secretscan.Default().WithKnown(k).ScanTree(context.Background(), root, secretscan.ModeMemory)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Rule != secretscan.RuleHostSecret || rep.Findings[0].Where != "/checkpoint.img" {
		t.Fatalf("findings %v, want the host value in checkpoint.img alone", rep.Findings)
	}
}

func TestMaxFindings(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 50; i++ {
		b.WriteString("ghp_" + rnd(alnum, 36) + "\n")
	}
	root := t.TempDir()
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		writeFile(t, filepath.Join(root, n), []byte(b.String()))
	}
	// At most 20, and 20/10+1 = 3 of one file.
	sc, _ := secretscan.New(secretscan.Config{MaxFindings: 20})
	rep, err := sc.ScanTree(context.Background(), root, secretscan.ModeFiles)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 20 || !rep.Truncated {
		t.Fatalf("%d findings, truncated %v; want 20 and truncated", len(rep.Findings), rep.Truncated)
	}
	if msg := rep.Err("x").Error(); !strings.Contains(msg, "; and 10 more") {
		t.Errorf("the error lists every finding: %s", msg)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, a := range map[string]secretscan.Allow{
		"no reason":   {Path: "/x"},
		"relative":    {Path: "x", Reason: "r"},
		"bad pattern": {Path: "/[", Reason: "r"},
		"host secret": {Path: "/x", Rules: []string{secretscan.RuleHostSecret}, Reason: "r"},
	} {
		if _, err := secretscan.New(secretscan.Config{Allow: []secretscan.Allow{a}}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// BenchmarkScanBytes measures the scan of 8 MiB of text and of binary
// data with three host values.
func BenchmarkScanBytes(b *testing.B) {
	k := &secretscan.Known{}
	for i := 0; i < 3; i++ {
		k.Add("value", rndBytes(32))
	}
	sc := secretscan.Default().WithKnown(k)
	text := bytes.Repeat([]byte("def token_for(user, secret=None):\n    return sign(user.id, password_hash)  # api_key in settings\n"), 8<<20/96)
	bin := rndBytes(8 << 20)
	for name, in := range map[string][]byte{"text": text, "binary": bin} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				sc.ScanBytes("/f", in)
			}
		})
	}
}
