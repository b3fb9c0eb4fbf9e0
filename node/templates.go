package node

import (
	"context"
	"io"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/service/template"
	"github.com/airlockhq/airlock/service/template/dockerfile"
)

// TemplatesConfig configures templates.
type TemplatesConfig struct {
	// Disabled turns templates off: /v1/templates answers 501 and
	// "template" on a request is not found.
	Disabled bool
	// InsecureRegistries are the registries (host:port) that may be
	// reached over plain HTTP; every other is HTTPS only.
	InsecureRegistries []string
	// RegistryAuthFile is a Docker config.json-style file of the node's
	// registry credentials ({"auths": {"host:port": {"auth": base64
	// "user:pass"}}}), used when a request brings none.
	RegistryAuthFile string
	// MaxContextBytes bounds an uploaded context; MaxBytes and MaxFiles
	// one template's rootfs; QuotaBytes a tenant's templates together
	// (negative: no quota). Zero: the package's defaults.
	MaxContextBytes int64
	MaxBytes        int64
	MaxFiles        int64
	QuotaBytes      int64
	// Builders adds (or replaces) the builder of a source kind, e.g. the
	// Dockerfile builder.
	Builders map[airlock.TemplateSource]template.Builder
	// DockerfileStepLimits bound each RUN of a Dockerfile build (zero:
	// the dockerfile package's defaults).
	DockerfileStepLimits airlock.Limits
}

// startTemplates makes the template service and records the builds an
// earlier process left unfinished as failed.
func (n *Node) startTemplates(ctx context.Context, secrets *secretscan.Known) error {
	c := n.cfg.Templates
	if c.Disabled {
		return nil
	}
	if n.cfg.AgentPath == "" {
		n.logger.Warn("templates are off: no agent binary to install into them (set --agent or put airlock-agent beside airlockd)")
		return nil
	}
	builders := map[airlock.TemplateSource]template.Builder{}
	oci, err := template.NewOCIBuilder(template.OCIConfig{
		StateDir: n.cfg.StateDir, InsecureRegistries: c.InsecureRegistries, AuthFile: c.RegistryAuthFile,
	})
	if err != nil {
		return err
	}
	builders[airlock.TemplateFromImage] = oci
	builders[airlock.TemplateFromArchive] = oci
	validators := map[airlock.TemplateSource]func(*airlock.CreateTemplateRequest) error{}
	// svc is set below, before any build runs: FROM may name a template.
	var svc *template.Service
	if df, err := n.dockerfileBuilder(secrets); err != nil {
		return err
	} else if df != nil {
		bases, err := template.NewBaseImages(n.cfg.StateDir, oci, c.MaxBytes, c.MaxFiles)
		if err != nil {
			return err
		}
		builders[airlock.TemplateFromDockerfile] = df.TemplateBuilder(func(ctx context.Context, tenantID, ref string, log io.Writer) (*airlock.Image, error) {
			if template.IsRegistryRef(ref) {
				// host:port/repo:tag: pulled as from_image is.
				return bases.Resolve(ctx, ref, log)
			}
			img, err := n.Images.Resolve(ctx, ref)
			if err == nil {
				return img, nil
			}
			return svc.ResolveTemplate(ctx, tenantID, ref)
		})
		validators[airlock.TemplateFromDockerfile] = df.Validate
	}
	for k, b := range c.Builders {
		builders[k] = b
	}
	blobs, onPull := n.templateObjects()
	svc, err = template.New(template.Config{
		StateDir: n.cfg.StateDir, Store: n.Store, AgentPath: n.cfg.AgentPath, Blobs: blobs, OnPull: onPull,
		Secrets: secretscan.Default().WithKnown(secrets), Builders: builders, Validators: validators,
		MaxContextBytes: c.MaxContextBytes, MaxBytes: c.MaxBytes, MaxFiles: c.MaxFiles, QuotaBytes: c.QuotaBytes,
		Logger: n.logger.With("component", "templates"),
		Forget: func(image string) {
			if n.Provisioner != nil {
				if k := n.Provisioner.Forget(image); k > 0 {
					n.logger.Info("deleted template: its ready sandboxes destroyed", "image", image, "members", k)
				}
			}
		},
	})
	if err != nil {
		return err
	}
	if k, err := svc.Recover(ctx); err != nil {
		svc.Close()
		return err
	} else if k > 0 {
		n.logger.Warn("template builds interrupted by the last stop are recorded failed", "templates", k)
	}
	n.Templates = svc
	n.onClose(func() { svc.Close() })
	return nil
}

// templateObjects are the object store templates go through, and the
// counter of pulls from it: only a node of a fleet with a shared object
// store (--etcd and --blobs s3://...) has them; elsewhere a template stays
// on the node that built it.
func (n *Node) templateObjects() (airlock.Blobs, template.PullFunc) {
	if !n.cfg.Fleet.enabled() || n.cfg.Blobs.URL == "" || n.Blobs == nil {
		return nil, nil
	}
	pulls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "airlock_template_pulls_total",
		Help: "Templates this node pulled from the fleet's object store, by result (pulled, failed).",
	}, []string{"result"})
	pullSeconds := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "airlock_template_pull_seconds",
		Help:    "How long pulling a template from the fleet's object store took (pulls that succeeded).",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 10),
	})
	n.Registry.MustRegister(pulls, pullSeconds)
	pulls.WithLabelValues("pulled")
	pulls.WithLabelValues("failed")
	return n.Blobs, func(id string, took time.Duration, err error) {
		if err != nil {
			pulls.WithLabelValues("failed").Inc()
			return
		}
		pulls.WithLabelValues("pulled").Inc()
		pullSeconds.Observe(took.Seconds())
	}
}

// heldTemplates are the IDs of the templates on this node's disk (nil
// without templates), for its fleet status.
func (n *Node) heldTemplates() []string {
	if n.Templates == nil {
		return nil
	}
	return n.Templates.Held()
}

// resolver is the image resolver of the services: images, and the
// images of templates by their internal names.
func (n *Node) resolver() airlock.ImageResolver {
	if n.Templates == nil {
		return n.Images
	}
	return n.Templates.Images(n.Images)
}

// templateResolver is nil without templates (an interface holding a nil
// pointer would not be).
func (n *Node) templateResolver() airlock.TemplateResolver {
	if n.Templates == nil {
		return nil
	}
	return n.Templates
}

func (n *Node) templateService() airlock.TemplateService {
	if n.Templates == nil {
		return nil
	}
	return n.Templates
}

// dockerfileBuilder is the Dockerfile builder on the first backend that
// runs build steps (gVisor), its cache in <state>/templates/dockerfile;
// nil when no backend does.
func (n *Node) dockerfileBuilder(secrets *secretscan.Known) (*dockerfile.Builder, error) {
	for _, b := range n.Backends {
		r, ok := b.(airlock.BuildRunner)
		if !ok {
			continue
		}
		state, err := filepath.Abs(n.cfg.StateDir)
		if err != nil {
			return nil, err
		}
		return dockerfile.New(dockerfile.Config{
			Dir: filepath.Join(state, "templates", "dockerfile"), Runner: r, Egress: n.egress, StepLimits: n.cfg.Templates.DockerfileStepLimits,
			Secrets: secretscan.Default().WithKnown(secrets), Logger: n.logger.With("component", "dockerfile"),
		})
	}
	return nil, nil
}
