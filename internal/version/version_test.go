package version_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock/internal/version"
)

func TestLine(t *testing.T) {
	old := version.Version
	t.Cleanup(func() { version.Version = old })
	version.Version = "1.2.3"
	if got := version.Line("airlockd"); !strings.HasPrefix(got, "airlockd 1.2.3 (go1.") {
		t.Errorf("Line = %q", got)
	}
}

func TestCollector(t *testing.T) {
	old := version.Version
	t.Cleanup(func() { version.Version = old })
	version.Version = "9.8.7"
	reg := prometheus.NewRegistry()
	reg.MustRegister(version.Collector())
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "airlock_build_info" || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v, %v; want one airlock_build_info series", mfs, err)
	}
	var labels []string
	for _, l := range mfs[0].GetMetric()[0].GetLabel() {
		labels = append(labels, l.GetName()+"="+l.GetValue())
	}
	if !strings.Contains(strings.Join(labels, ","), "version=9.8.7") || mfs[0].GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Errorf("airlock_build_info = %v %v, want version=9.8.7 and 1", labels, mfs[0].GetMetric()[0].GetGauge().GetValue())
	}
}

func TestIsFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"--version"}, true},
		{[]string{"-version"}, true},
		{nil, false},
		{[]string{"--version", "x"}, false},
		{[]string{"run"}, false},
	} {
		if got := version.IsFlag(tt.args); got != tt.want {
			t.Errorf("IsFlag(%q) = %v", tt.args, got)
		}
	}
}
