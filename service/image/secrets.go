package image

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/secretscan"
)

// ProblemSecret is the problem type of an image refused because it holds
// a credential.
const ProblemSecret = "secret-in-image"

// SecretScan summarises the scan of a published image's rootfs.
type SecretScan struct {
	Files      int      `json:"files"`
	Bytes      int64    `json:"bytes"`
	DurationMS int64    `json:"duration_ms"`
	Allowed    []string `json:"allowed,omitempty"` // findings an allow entry covers, with its reason
	Skipped    []string `json:"skipped,omitempty"` // entries not read, with why (special files are only counted)
	Special    int      `json:"special_files,omitempty"`
}

// refused wraps a *secretscan.FoundError in the domain error: an
// unprocessable image; the error's text names each finding (masked).
func refused(name string, err error) error {
	return &airlock.Error{Code: airlock.EUNPROCESSABLE, Type: ProblemSecret, Message: "refused to publish image " + name, Err: err}
}

// scanSpec checks a spec's environment and files before anything is
// built from it.
func (b *Builder) scanSpec(spec airlock.ImageSpec) error {
	fs := b.cfg.Secrets.ScanEnv(envList(spec.Env))
	for _, p := range slices.Sorted(maps.Keys(spec.Files)) {
		fs = append(fs, b.cfg.Secrets.ScanBytes("spec file "+p, []byte(spec.Files[p]))...)
	}
	if err := secretscan.Refusal("image spec "+spec.Name, fs); err != nil {
		return refused(spec.Name, err)
	}
	return nil
}

// scanRootfs scans a rootfs about to be published and refuses it if it
// holds a credential. Allowed findings and skipped files are reported on
// the progress writer and kept in the manifest.
func (b *Builder) scanRootfs(ctx context.Context, bl *build, name, rootfs string) (*SecretScan, error) {
	bl.step("scan the rootfs for credentials")
	rep, err := b.cfg.Secrets.ScanTree(ctx, rootfs, secretscan.ModeFiles)
	if err != nil {
		return nil, fmt.Errorf("secret scan of %s: %w", rootfs, err)
	}
	sum := &SecretScan{Files: rep.Files, Bytes: rep.Bytes, DurationMS: rep.Duration.Milliseconds()}
	for _, f := range rep.Allowed() {
		bl.step("  allowed: %s", f)
		sum.Allowed = append(sum.Allowed, f.String())
	}
	for _, s := range rep.Skipped {
		if s.Special {
			sum.Special++
			continue
		}
		bl.step("  not scanned: %s: %s", s.Path, s.Reason)
		sum.Skipped = append(sum.Skipped, s.Path+": "+s.Reason)
	}
	bl.step("scanned %d files (%s) in %.1fs: %d allowed, %d special files skipped",
		rep.Files, HumanSize(rep.Bytes), rep.Duration.Seconds(), len(sum.Allowed), sum.Special)
	if err := rep.Err("image " + name); err != nil {
		bl.step("refused: %v", err)
		return nil, refused(name, err)
	}
	if rep.Truncated { // allowed findings alone filled the bound: the rest is unread
		return nil, fmt.Errorf("secret scan of image %s stopped after %d findings; not published", name, len(rep.Findings))
	}
	return sum, nil
}
