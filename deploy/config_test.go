package deploy_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestSettingsCheck: the settings the deployment files give airlockd
// (the systemd environment file; the ConfigMap, the Secret, the
// DaemonSet's variables and arguments) pass `airlockd config check`:
// every variable is one airlockd reads, every value parses (booleans
// strictly), and none is a deprecated name.
func TestSettingsCheck(t *testing.T) {
	bin := buildAirlockd(t)
	check := func(where string, env map[string]string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"config", "check"}, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // nothing of this machine's AIRLOCK_*
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), "deprecated") {
			t.Errorf("%s: airlockd config check: %v\n%s", where, err, out)
		}
	}

	env := map[string]string{}
	for _, line := range readLines(t, "systemd/airlockd.env.example") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			env[k] = v
		}
	}
	check("airlockd.env.example", env)

	ms := loadManifests(t)
	ds := find[*appsv1.DaemonSet](ms, "airlockd")
	cm := find[*corev1.ConfigMap](ms, "airlockd")
	sec := find[*corev1.Secret](ms, "airlockd")
	if ds == nil || cm == nil || sec == nil {
		t.Fatal("missing the airlockd DaemonSet, ConfigMap or Secret")
	}
	env = map[string]string{}
	for k, v := range cm.Data {
		env[k] = v
	}
	for k, v := range sec.StringData {
		env[k] = v
	}
	c := container(ds.Spec.Template.Spec.Containers, "airlockd")
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			v = sec.StringData[e.ValueFrom.SecretKeyRef.Key]
		case e.ValueFrom != nil:
			v = "node-1" // a field of the pod: its node's name or its address
		}
		env[e.Name] = v
	}
	var args []string
	for _, a := range c.Args {
		args = append(args, strings.ReplaceAll(a, "$(POD_IP)", "10.244.0.5"))
	}
	check("the DaemonSet", env, args...)
}
