package secretscan_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/secretscan"
)

// FuzzScanBytes: whatever a file holds, the scan ends without a panic,
// every finding lies inside the input and its excerpt is printable, and a
// planted host secret is always found and never shown.
func FuzzScanBytes(f *testing.F) {
	f.Add([]byte("API_TOKEN = \"aB3dE5gH7jK9mN1pQ3sT5vX7\"\n"))
	f.Add([]byte("-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\n"))
	f.Add([]byte("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlc2lnbmF0dXJl"))
	f.Add([]byte(`{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\n`))
	f.Add([]byte("AKIAABCDEFGHIJKLMNOP wJalrXUtnFEMI/K7MDENGbPxRfiCYzzzzzzzzzzz"))
	f.Add([]byte("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=\x00\xff"))
	f.Add([]byte("PuTTY-User-Key-File-3: x\nPrivate-Lines: 1\n"))
	const host = "HostHeldValue-3f9a1c"
	k := &secretscan.Known{}
	k.Add("fuzz secret", []byte(host))
	sc := secretscan.Default().WithKnown(k)
	f.Fuzz(func(t *testing.T, b []byte) {
		planted := append(append(bytes.Clone(b), host...), b...)
		for _, in := range [][]byte{b, planted} {
			fs := sc.ScanBytes("/f", in)
			for _, fd := range fs {
				if fd.Offset < 0 || fd.Offset >= int64(len(in)) {
					t.Fatalf("offset %d outside %d bytes", fd.Offset, len(in))
				}
				for _, c := range []byte(fd.Excerpt) {
					if c < 0x20 || c > 0x7e {
						t.Fatalf("unprintable excerpt %q", fd.Excerpt)
					}
				}
				if strings.Contains(fd.String(), host) {
					t.Fatalf("the host secret shown: %s", fd)
				}
			}
			if bytes.Contains(in, []byte(host)) {
				found := false
				for _, fd := range fs {
					found = found || fd.Rule == secretscan.RuleHostSecret
				}
				if !found {
					t.Fatalf("the planted host secret was not found: %v", fs)
				}
			}
		}
		sc.ScanEnv([]string{string(b), "X=" + string(b)})
	})
}
