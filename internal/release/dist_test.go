package release_test

import (
	"archive/tar"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testenv/testport"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// testRepo is the repository the test releases name their image in: not
// one an operator pushes to, so a loaded test image never shadows a real
// one.
const testRepo = "localhost/airlock-release-test/airlockd"

// dist is one release made by scripts/release.sh for the tests of this
// package, and its tarball unpacked.
type dist struct {
	dir     string // release.sh's output directory
	version string
	name    string // airlock-<version>-linux-amd64
	tarball string
	archive string // airlockd-<version>.oci.tar
	tree    string // the unpacked tarball's folder
}

var (
	distOnce sync.Once
	distVal  *dist
	distErr  error
	distTmp  string
)

// TestMain removes the release the tests made.
func TestMain(m *testing.M) {
	code := m.Run()
	if distTmp != "" {
		os.RemoveAll(distTmp)
	}
	os.Exit(code)
}

// testRelease returns the release the tests share: made once by
// scripts/release.sh (about three minutes on the 2-core development
// machines: three builds, the image's layers, the tarball), or, when
// AIRLOCK_TEST_RELEASE_DIST names a directory release.sh wrote (and
// AIRLOCK_TEST_RELEASE_VERSION its version), that one.
func testRelease(t *testing.T) *dist {
	t.Helper()
	testenv.RequireRoot(t)
	if os.Getenv("AIRLOCK_TEST_RELEASE_DIST") == "" {
		prefix := os.Getenv("AIRLOCK_PREFIX")
		if prefix == "" {
			prefix = "/usr/local"
		}
		if b, err := os.ReadFile(filepath.Join(prefix, "lib/airlock/runsc.version")); err != nil || !strings.Contains(string(b), "seccomp-precompiled") {
			testreq.Skipf(t, "skipped: no runsc built by scripts/setup.sh under %s (release.sh ships it)", prefix)
		}
		if _, err := exec.LookPath("go"); err != nil {
			testreq.Skip(t, "skipped: release.sh builds with go, which is not on PATH")
		}
	}
	distOnce.Do(func() { distVal, distErr = makeDist(t) })
	if distErr != nil {
		t.Fatal(distErr)
	}
	return distVal
}

func makeDist(t *testing.T) (*dist, error) {
	var err error
	if distTmp, err = os.MkdirTemp("", "airlock-release-test-"); err != nil {
		return nil, err
	}
	d := &dist{dir: os.Getenv("AIRLOCK_TEST_RELEASE_DIST"), version: os.Getenv("AIRLOCK_TEST_RELEASE_VERSION")}
	if d.dir == "" {
		d.dir = filepath.Join(distTmp, "dist")
		d.version = "0.0.0-test." + randomHex(4)
		cmd := exec.Command("bash", "../../scripts/release.sh", "--version", d.version, "--repo", testRepo, "--dist", d.dir)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("scripts/release.sh: %v\n%s", err, out)
		}
		t.Logf("scripts/release.sh made release %s in %v", d.version, time.Since(start).Round(time.Second))
	} else if d.version == "" {
		return nil, errors.New("AIRLOCK_TEST_RELEASE_DIST is set without AIRLOCK_TEST_RELEASE_VERSION")
	}
	d.name = "airlock-" + d.version + "-linux-amd64"
	d.tarball = filepath.Join(d.dir, d.name+".tar.gz")
	d.archive = filepath.Join(d.dir, "airlockd-"+d.version+".oci.tar")
	unpacked := filepath.Join(distTmp, "unpacked")
	tops, err := untarGz(d.tarball, unpacked)
	if err != nil {
		return nil, err
	}
	if len(tops) != 1 || tops[0] != d.name {
		return nil, fmt.Errorf("%s unpacks into %q, want one folder %s", d.tarball, tops, d.name)
	}
	d.tree = filepath.Join(unpacked, d.name)
	return d, nil
}

// untarGz unpacks a gzipped tar into dst, refusing names that leave it;
// it returns the top-level names.
func untarGz(file, dst string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tops := map[string]bool{}
	var order []string
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return order, nil
		} else if err != nil {
			return nil, err
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if !filepath.IsLocal(name) {
			return nil, fmt.Errorf("%s: entry %q leaves the folder", file, h.Name)
		}
		if top := strings.SplitN(name, string(filepath.Separator), 2)[0]; !tops[top] {
			tops[top] = true
			order = append(order, top)
		}
		p := filepath.Join(dst, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return nil, err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
			w, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(w, tr)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%s: entry %q of type %c: the tarball holds only folders and files", file, h.Name, h.Typeflag)
		}
	}
}

// seedStages gives state the debootstrap stages of the machine's images
// (testenv.StateDir, as hard links: nothing is copied), so that building
// the images there installs the release's agent into them without
// debootstrap, the network or several minutes.
func seedStages(t *testing.T, state string) {
	t.Helper()
	src := filepath.Join(testenv.StateDir(), "images", "stages")
	if es, err := os.ReadDir(src); err != nil || len(es) == 0 {
		testreq.Skipf(t, "skipped: no image stages in %s to seed the install's images from (scripts/setup.sh builds them)", src)
	}
	if err := os.MkdirAll(filepath.Join(state, "images"), 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-al", src, filepath.Join(state, "images", "stages")).CombinedOutput(); err != nil {
		t.Fatalf("cp -al %s: %v\n%s", src, err, out)
	}
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	return testport.Addr(t)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
