package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/service/image"
)

// buildMissingImages builds, one after another, each shipped image the
// node's agent has no build of, while the node serves: scripts/run.sh
// builds base before the start and leaves python-ds to the node, so a
// first result does not wait for the data-science image. While an image
// is being built, Resolve answers 503 image-building for it (and one-shot
// Python that needs nothing of python-ds runs on base). Once an image is
// built, its warm pairs are readied. A build's whole output goes to
// <state-dir>/image-build-<name>.log, its steps to the node's log. A
// failed build is logged and left: the next start tries again.
func (n *Node) buildMissingImages(ctx context.Context, missing []string) {
	defer func() {
		for _, name := range missing {
			n.Images.Built(name)
		}
	}()
	for _, name := range missing {
		if ctx.Err() != nil {
			return
		}
		start := time.Now()
		n.logger.Info("building a missing image in the background", "image", name, "log", n.imageBuildLog(name))
		img, err := n.buildImage(ctx, name)
		n.Images.Built(name)
		if err != nil {
			n.logger.Error("building an image failed; the next start tries again", "image", name, "err", err, "log", n.imageBuildLog(name))
			continue
		}
		n.logger.Info("image built", "image", name, "hash", image.Short(img.Hash), "took", time.Since(start).Round(time.Second))
		n.warmImage(ctx, name)
	}
}

// missingImages returns the shipped images the node's agent has no build
// of, marked as being built (before the node serves, so no request sees
// "not built" for what is about to be built).
func (n *Node) missingImages(ctx context.Context) []string {
	if !n.cfg.BuildImages {
		return nil
	}
	if n.cfg.AgentPath == "" {
		n.logger.Warn("not building missing images: no agent binary (--agent)")
		return nil
	}
	var missing []string
	for _, name := range image.Names() {
		if _, err := n.Images.Resolve(ctx, name); airlock.ErrorCode(err) == airlock.ENOTFOUND {
			missing = append(missing, name)
			n.Images.Building(name, time.Now())
		}
	}
	return missing
}

func (n *Node) imageBuildLog(name string) string {
	return filepath.Join(n.cfg.StateDir, "image-build-"+name+".log")
}

// buildImage builds the shipped image name with the node's agent.
func (n *Node) buildImage(ctx context.Context, name string) (*airlock.Image, error) {
	spec, err := image.SpecByName(name)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(n.imageBuildLog(name), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	steps := &stepLogger{n: n, image: name}
	defer steps.Close()
	b, err := image.NewBuilder(image.Config{
		StateDir:  n.cfg.StateDir,
		AgentPath: n.cfg.AgentPath,
		Progress:  io.MultiWriter(f, steps),
		Secrets:   secretscan.Default().WithKnown(n.secrets),
	})
	if err != nil {
		return nil, err
	}
	img, err := b.Build(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", name, err)
	}
	return img, nil
}

// warmImage readies the one-shot and session pairs of a newly built image.
func (n *Node) warmImage(ctx context.Context, name string) {
	var pairs []string
	for _, w := range n.cfg.Warm {
		if strings.HasPrefix(w, name+"/") {
			pairs = append(pairs, w)
		}
	}
	if err := n.OneShot.Warm(ctx, pairs); err != nil {
		n.logger.Warn("readying the pool of a built image", "image", name, "err", err)
	}
	sessions := n.cfg.Sessions
	sessions.Warm = nil
	for _, w := range n.cfg.Sessions.Warm {
		if strings.HasPrefix(w, name+"/") {
			sessions.Warm = append(sessions.Warm, w)
		}
	}
	if err := warmSessions(ctx, sessions, n.Sessions, n.logger); err != nil {
		n.logger.Warn("readying the sessions of a built image", "image", name, "err", err)
	}
}

// stepLogger passes the builder's own step lines ("[python-ds 12.3s]
// ...") to the node's log; debootstrap's output stays in the file.
type stepLogger struct {
	n     *Node
	image string
	pw    *io.PipeWriter
	done  chan struct{}
}

func (s *stepLogger) Write(p []byte) (int, error) {
	if s.pw == nil {
		pr, pw := io.Pipe()
		s.pw, s.done = pw, make(chan struct{})
		go func() {
			defer close(s.done)
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				if line := sc.Text(); strings.HasPrefix(line, "[") {
					s.n.logger.Info("image build", "image", s.image, "step", line)
				}
			}
			io.Copy(io.Discard, pr)
		}()
	}
	if _, err := s.pw.Write(p); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		return 0, err
	}
	return len(p), nil
}

func (s *stepLogger) Close() error {
	if s.pw != nil {
		s.pw.Close()
		<-s.done
	}
	return nil
}
