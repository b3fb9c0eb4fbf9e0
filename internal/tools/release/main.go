// Command release is scripts/release.sh's Go half: it writes airlockd's
// OCI image archive and the Kubernetes manifests with its digest pinned
// (see internal/release).
//
//	release image -base DIR -version V -out FILE.oci.tar -bin FILE... -doc FILE...
//	release mirror [-suite bookworm]
//	release pin -src deploy/kubernetes -dst DIR -ref REPO:V@sha256:...
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/airlockhq/airlock/internal/release"
	"github.com/airlockhq/airlock/service/image"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: release image|pin [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("release "+os.Args[1], flag.ExitOnError)
	switch os.Args[1] {
	case "image":
		var bins, docs list
		base := fs.String("base", "", "root file system directory of the base layer")
		version := fs.String("version", "", "release version")
		out := fs.String("out", "", "OCI image archive to write")
		repo := fs.String("repo", "", "image repository: the archive names the image REPO:VERSION; with it, print REPO:VERSION@DIGEST instead of the digest")
		fs.Var(&bins, "bin", "binary for /usr/local/bin (repeat)")
		fs.Var(&docs, "doc", "document for /usr/share/doc/airlock (repeat)")
		fs.Parse(os.Args[2:])
		d, err := release.BuildImage(release.ImageConfig{Base: *base, Bins: bins, Docs: docs, Version: *version, Repo: *repo}, *out)
		if err != nil {
			fail(err)
		}
		if *repo == "" {
			fmt.Println(d)
			return
		}
		ref, err := release.Ref(*repo, *version, d)
		if err != nil {
			fail(err)
		}
		fmt.Println(ref)
	case "pin":
		src := fs.String("src", "deploy/kubernetes", "manifests to copy")
		dst := fs.String("dst", "", "directory to write")
		ref := fs.String("ref", "", "image reference to pin")
		fs.Parse(os.Args[2:])
		n, err := release.PinManifests(*src, *dst, *ref)
		if err != nil {
			fail(err)
		}
		fmt.Printf("pinned %d image references to %s in %s\n", n, *ref, *dst)
	case "mirror":
		// The Debian mirror the host's apt sources name, as the image
		// builder finds it.
		suite := fs.String("suite", "bookworm", "Debian suite")
		fs.Parse(os.Args[2:])
		m, err := image.HostMirror("/etc/apt", *suite)
		if err != nil {
			fail(err)
		}
		fmt.Println(m)
	default:
		fmt.Fprintf(os.Stderr, "release: unknown subcommand %q\n", os.Args[1])
		os.Exit(2)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "release:", err)
	os.Exit(1)
}
