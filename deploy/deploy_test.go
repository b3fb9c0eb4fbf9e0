package deploy_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/blob/disk"
	"github.com/airlockhq/airlock/store/sqlite"
)

// kinds maps apiVersion/kind to a new object of its API type. A manifest
// of any other kind fails the test.
var kinds = map[string]func() any{
	"v1/Namespace":                       func() any { return &corev1.Namespace{} },
	"v1/ConfigMap":                       func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                          func() any { return &corev1.Secret{} },
	"v1/Service":                         func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                  func() any { return &corev1.ServiceAccount{} },
	"apps/v1/DaemonSet":                  func() any { return &appsv1.DaemonSet{} },
	"apps/v1/StatefulSet":                func() any { return &appsv1.StatefulSet{} },
	"policy/v1/PodDisruptionBudget":      func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy": func() any { return &networkingv1.NetworkPolicy{} },
}

type manifest struct {
	file string
	obj  any
}

// docSep splits a YAML stream into documents.
var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// loadManifests strictly decodes every document of every .yaml file under
// kubernetes/.
func loadManifests(t *testing.T) []manifest {
	t.Helper()
	var out []manifest
	err := filepath.WalkDir("kubernetes", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !strings.HasSuffix(p, ".yaml") {
			t.Errorf("%s: not a .yaml file (only manifests belong in kubernetes/)", p)
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, doc := range docSep.Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			obj, err := decodeStrict([]byte(doc))
			if err != nil {
				t.Errorf("%s document %d: %v", p, i+1, err)
				continue
			}
			out = append(out, manifest{file: p, obj: obj})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no manifests under kubernetes/")
	}
	return out
}

func stripComments(doc string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// decodeStrict decodes one document into the type of its kind, failing on
// an unknown or duplicate field.
func decodeStrict(doc []byte) (any, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	mk, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return nil, fmt.Errorf("unknown apiVersion/kind %s/%s", tm.APIVersion, tm.Kind)
	}
	obj := mk()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return obj, nil
}

func TestDecodeStrictRejects(t *testing.T) {
	for _, tt := range []struct{ name, doc string }{
		{"unknown field", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndatta:\n  a: b\n"},
		{"misspelt nested field", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: x\nspec:\n  template:\n    spec:\n      nodeSelecter: {}\n"},
		{"duplicate field", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  name: y\n"},
		{"wrong type", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: x\nspec:\n  replicas: three\n"},
		{"unknown kind", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n"},
	} {
		if _, err := decodeStrict([]byte(tt.doc)); err == nil {
			t.Errorf("%s: decoded without error", tt.name)
		}
	}
}

func podSpecs(ms []manifest) map[string]*corev1.PodTemplateSpec {
	out := map[string]*corev1.PodTemplateSpec{}
	for _, m := range ms {
		switch o := m.obj.(type) {
		case *appsv1.DaemonSet:
			out["DaemonSet/"+o.Name] = &o.Spec.Template
		case *appsv1.StatefulSet:
			out["StatefulSet/"+o.Name] = &o.Spec.Template
		}
	}
	return out
}

func find[T any](ms []manifest, name string) T {
	var zero T
	for _, m := range ms {
		if o, ok := m.obj.(T); ok {
			if fmt.Sprint(nameOf(m.obj)) == name {
				return o
			}
		}
	}
	return zero
}

func nameOf(obj any) string {
	switch o := obj.(type) {
	case *corev1.Namespace:
		return o.Name
	case *corev1.ConfigMap:
		return o.Name
	case *corev1.Secret:
		return o.Name
	case *corev1.Service:
		return o.Name
	case *corev1.ServiceAccount:
		return o.Name
	case *appsv1.DaemonSet:
		return o.Name
	case *appsv1.StatefulSet:
		return o.Name
	case *policyv1.PodDisruptionBudget:
		return o.Name
	case *networkingv1.NetworkPolicy:
		return o.Name
	}
	return ""
}

func TestManifests(t *testing.T) {
	ms := loadManifests(t)

	t.Run("namespaced", func(t *testing.T) {
		for _, m := range ms {
			var ns string
			switch o := m.obj.(type) {
			case *corev1.Namespace:
				continue
			case *corev1.ConfigMap:
				ns = o.Namespace
			case *corev1.Secret:
				ns = o.Namespace
			case *corev1.Service:
				ns = o.Namespace
			case *appsv1.DaemonSet:
				ns = o.Namespace
			case *appsv1.StatefulSet:
				ns = o.Namespace
			case *policyv1.PodDisruptionBudget:
				ns = o.Namespace
			case *networkingv1.NetworkPolicy:
				ns = o.Namespace
			}
			if ns != "airlock" {
				t.Errorf("%s %s: namespace %q, want airlock", m.file, nameOf(m.obj), ns)
			}
		}
	})

	t.Run("images and resources", func(t *testing.T) {
		specs := podSpecs(ms)
		if len(specs) < 3 {
			t.Fatalf("%d workloads, want the airlockd DaemonSet and the etcd and postgres StatefulSets", len(specs))
		}
		for name, tmpl := range specs {
			for _, c := range append(slices.Clone(tmpl.Spec.InitContainers), tmpl.Spec.Containers...) {
				switch {
				case c.Image == "" || !strings.Contains(c.Image, ":") || strings.HasSuffix(c.Image, ":latest"):
					t.Errorf("%s container %s: image %q must name a version", name, c.Name, c.Image)
				}
				if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
					t.Errorf("%s container %s: needs CPU and memory requests and a memory limit, has %+v", name, c.Name, c.Resources)
				}
			}
		}
	})

	t.Run("airlockd daemonset", func(t *testing.T) {
		ds := find[*appsv1.DaemonSet](ms, "airlockd")
		if ds == nil {
			t.Fatal("no DaemonSet airlockd")
		}
		spec := ds.Spec.Template.Spec
		if spec.NodeSelector["airlock.dev/sandbox-host"] != "true" {
			t.Errorf("nodeSelector %v: want airlock.dev/sandbox-host=true", spec.NodeSelector)
		}
		tolerated := slices.ContainsFunc(spec.Tolerations, func(tl corev1.Toleration) bool {
			return tl.Key == "airlock.dev/sandbox-host" && tl.Effect == corev1.TaintEffectNoSchedule
		})
		if !tolerated {
			t.Errorf("tolerations %v: want the airlock.dev/sandbox-host NoSchedule taint tolerated", spec.Tolerations)
		}
		if !labelsMatch(ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels) {
			t.Errorf("selector %v does not match the template's labels %v", ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels)
		}
		if spec.HostNetwork || spec.HostPID {
			t.Errorf("hostNetwork %v hostPID %v: the comments explain why neither is needed", spec.HostNetwork, spec.HostPID)
		}
		c := container(spec.Containers, "airlockd")
		if c == nil {
			t.Fatal("no container airlockd")
		}
		if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
			t.Error("the airlockd container must be privileged (runsc and nftables; see its comments)")
		}
		for _, p := range []struct {
			name  string
			probe *corev1.Probe
			path  string
		}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
			if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "api" {
				t.Errorf("%s probe %+v: want GET %s on port api", p.name, p.probe, p.path)
			}
		}
		api := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "api" })
		cm := find[*corev1.ConfigMap](ms, "airlockd")
		if api < 0 || cm == nil || !strings.HasSuffix(cm.Data["AIRLOCK_LISTEN"], fmt.Sprintf(":%d", c.Ports[api].ContainerPort)) {
			t.Errorf("port api and AIRLOCK_LISTEN disagree")
		}
		mounted := map[string]bool{}
		for _, v := range c.VolumeMounts {
			mounted[v.MountPath] = true
		}
		if cm != nil {
			for _, k := range []string{"AIRLOCK_STATE_DIR", "AIRLOCK_SIGNING_KEY_FILE", "AIRLOCK_MASTER_KEY_FILE"} {
				p := cm.Data[k]
				if p == "" {
					t.Errorf("ConfigMap lacks %s", k)
					continue
				}
				if !mounted[p] && !mounted[filepath.Dir(p)] {
					t.Errorf("%s=%s is on no volume mount of the container", k, p)
				}
			}
		}
	})

	t.Run("statefulsets", func(t *testing.T) {
		for _, tt := range []struct {
			name     string
			replicas int32
		}{{"etcd", 3}, {"postgres", 1}} {
			ss := find[*appsv1.StatefulSet](ms, tt.name)
			if ss == nil {
				t.Errorf("no StatefulSet %s", tt.name)
				continue
			}
			if ss.Spec.Replicas == nil || *ss.Spec.Replicas != tt.replicas {
				t.Errorf("%s: replicas %v, want %d", tt.name, ss.Spec.Replicas, tt.replicas)
			}
			headless := slices.ContainsFunc(ms, func(m manifest) bool {
				svc, ok := m.obj.(*corev1.Service)
				return ok && svc.Name == ss.Spec.ServiceName && svc.Spec.ClusterIP == corev1.ClusterIPNone
			})
			if !headless {
				t.Errorf("%s: serviceName %q is not a headless Service here", tt.name, ss.Spec.ServiceName)
			}
			if !labelsMatch(ss.Spec.Selector.MatchLabels, ss.Spec.Template.Labels) {
				t.Errorf("%s: selector does not match the template's labels", tt.name)
			}
			if len(ss.Spec.VolumeClaimTemplates) == 0 {
				t.Errorf("%s: no volume claim: its data would not survive the pod", tt.name)
			}
		}
		if ss := find[*appsv1.StatefulSet](ms, "etcd"); ss != nil {
			args := strings.Join(ss.Spec.Template.Spec.Containers[0].Command, " ")
			for i := range 3 {
				if !strings.Contains(args, fmt.Sprintf("etcd-%d=http", i)) {
					t.Errorf("etcd --initial-cluster lacks member etcd-%d: %s", i, args)
				}
			}
		}
	})

	t.Run("services select pods", func(t *testing.T) {
		specs := podSpecs(ms)
		for _, m := range ms {
			svc, ok := m.obj.(*corev1.Service)
			if !ok || svc.Spec.Type == corev1.ServiceTypeExternalName {
				continue
			}
			hit := false
			for _, tmpl := range specs {
				hit = hit || labelsMatch(svc.Spec.Selector, tmpl.Labels)
			}
			if len(svc.Spec.Selector) == 0 || !hit {
				t.Errorf("Service %s selects no workload's pods (%v)", svc.Name, svc.Spec.Selector)
			}
		}
	})
}

func labelsMatch(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func container(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// buildAirlockd builds airlockd into a temporary directory.
func buildAirlockd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "airlockd")
	// -trimpath and cgo as scripts/setup.sh builds bin/airlockd: the
	// compiled packages are then the build cache's, and only the link is
	// new (without it, a fresh CI machine compiled about 200 packages
	// again here: 212 s of TestSettingsCheck).
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "../cmd/airlockd")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build airlockd: %v\n%s", err, out)
	}
	return bin
}

// airlockdHelp builds airlockd and returns what airlockd -h prints.
func airlockdHelp(t *testing.T) string {
	t.Helper()
	bin := buildAirlockd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("airlockd -h: %v\n%s", err, out)
	}
	return string(out)
}

var (
	helpFlag = regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)
	helpEnv  = regexp.MustCompile(`\b(AIRLOCK_[A-Z0-9_]+)\b`)
	argFlag  = regexp.MustCompile(`^--?([a-z0-9-]+)(=.*)?$`)
)

// TestFlagsExist: every flag the manifests and units give airlockd, and
// every AIRLOCK_* variable they set, is one airlockd -h lists.
func TestFlagsExist(t *testing.T) {
	help := airlockdHelp(t)
	flags := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(help, -1) {
		flags[m[1]] = true
	}
	envs := map[string]bool{}
	for _, m := range helpEnv.FindAllStringSubmatch(help, -1) {
		envs[m[1]] = true
	}
	if !flags["listen"] || !flags["blobs"] || !envs["AIRLOCK_LISTEN"] {
		t.Fatalf("airlockd -h did not parse: flags %v, variables %v", flags, envs)
	}
	checkEnv := func(where, name string) {
		if strings.HasPrefix(name, "AIRLOCK_") && !envs[name] {
			t.Errorf("%s sets %s, which airlockd -h does not name", where, name)
		}
	}

	ms := loadManifests(t)
	ds := find[*appsv1.DaemonSet](ms, "airlockd")
	cm := find[*corev1.ConfigMap](ms, "airlockd")
	sec := find[*corev1.Secret](ms, "airlockd")
	if ds == nil || cm == nil || sec == nil {
		t.Fatal("missing the airlockd DaemonSet, ConfigMap or Secret")
	}
	c := container(ds.Spec.Template.Spec.Containers, "airlockd")
	for _, a := range c.Args {
		if m := argFlag.FindStringSubmatch(a); m != nil && !flags[m[1]] {
			t.Errorf("the DaemonSet passes --%s, which airlockd does not have", m[1])
		}
	}
	for _, e := range c.Env {
		checkEnv("the DaemonSet", e.Name)
	}
	for k := range cm.Data {
		checkEnv("the ConfigMap", k)
	}
	for k := range sec.StringData {
		checkEnv("the Secret", k)
	}

	// The systemd env file and any flags in ExecStart=.
	for _, line := range readLines(t, "systemd/airlockd.env.example") {
		if k, _, ok := strings.Cut(line, "="); ok {
			checkEnv("airlockd.env.example", k)
		}
	}
	u := parseUnit(t, "systemd/airlockd.service")
	for _, f := range strings.Fields(u["Service"]["ExecStart"][0])[1:] {
		if m := argFlag.FindStringSubmatch(f); m != nil && !flags[m[1]] {
			t.Errorf("airlockd.service passes --%s, which airlockd does not have", m[1])
		}
	}
}

// TestProbePathsServed: /healthz and /readyz, which the probes use, are
// routes of airlockd's API (served without a key).
func TestProbePathsServed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	blobs, err := disk.New(disk.Config{Dir: filepath.Join(dir, "blobs")})
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	api, err := rest.New(rest.Config{Store: store, Blobs: blobs, Executor: noExecutor{}, SigningKey: bytes.Repeat([]byte("k"), 32),
		Ready: func(context.Context) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		rec := httptest.NewRecorder()
		api.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
	}
	rec := httptest.NewRecorder()
	api.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/not-a-probe", nil))
	if rec.Code == http.StatusOK {
		t.Errorf("GET /not-a-probe: 200; the check above proves nothing")
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// noExecutor runs nothing: the probes never execute code.
type noExecutor struct{}

func (noExecutor) Execute(context.Context, *airlock.Tenant, string, airlock.ExecuteRequest) (*airlock.Execution, error) {
	return nil, airlock.Errorf(airlock.EUNAVAILABLE, "no executor in this test")
}
