package quota_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/airlockhq/airlock/service/quota"
)

func TestParseAssignment(t *testing.T) {
	tests := []struct {
		in    string
		key   quota.Key
		value int64
		ok    bool
	}{
		{"sessions=4", quota.Sessions, 4, true},
		{"sessions=0", quota.Sessions, 0, true},
		{"sessions=unlimited", quota.Sessions, quota.Unlimited, true},
		{"sessions=-1", quota.Sessions, quota.Unlimited, true},
		{"runs=2", quota.Runs, 2, true},
		{"executions_per_minute=600", quota.ExecutionsPerMinute, 600, true},
		{"vcpu=4", quota.VCPU, 4000, true},
		{"vcpu=0.5", quota.VCPU, 500, true},
		{"vcpu=1500m", quota.VCPU, 1500, true},
		{"memory=512MiB", quota.Memory, 512 << 20, true},
		{"memory=4GiB", quota.Memory, 4 << 30, true},
		{"memory=1GB", quota.Memory, 1e9, true},
		{"memory=1048576", quota.Memory, 1 << 20, true},
		{"sandbox_seconds_per_day=3600", quota.SandboxSecondsPerDay, 3600, true},
		{"sandbox_seconds_per_day=8h", quota.SandboxSecondsPerDay, 8 * 3600, true},
		{"egress_bytes_per_day=10GiB", quota.EgressBytesPerDay, 10 << 30, true},
		{" sessions = 3 ", quota.Sessions, 3, true},

		{"sessions", "", 0, false},
		{"=4", "", 0, false},
		{"nonsense=4", "", 0, false},
		{"sessions=-2", "", 0, false},
		{"sessions=1.5", "", 0, false},
		{"sessions=x", "", 0, false},
		{"vcpu=-1.5", "", 0, false},
		{"vcpu=NaN", "", 0, false},
		{"memory=12XB", "", 0, false},
		{"memory=99999999999TiB", "", 0, false},
		{"sandbox_seconds_per_day=-1h", "", 0, false},
		{"runs=99999999999999999999", "", 0, false},
	}
	for _, tt := range tests {
		k, v, err := quota.ParseAssignment(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseAssignment(%q): err %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if tt.ok && (k != tt.key || v != tt.value) {
			t.Errorf("ParseAssignment(%q) = %s %d, want %s %d", tt.in, k, v, tt.key, tt.value)
		}
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		k    quota.Key
		v    int64
		want string
	}{
		{quota.VCPU, 2500, "2.5"},
		{quota.Memory, 512 << 20, "512MiB"},
		{quota.Memory, 1000, "1000"},
		{quota.Sessions, quota.Unlimited, "unlimited"},
	}
	for _, tt := range tests {
		if got := tt.k.Format(tt.v); got != tt.want {
			t.Errorf("%s.Format(%d) = %q, want %q", tt.k, tt.v, got, tt.want)
		}
		// What Format writes, ParseValue reads back.
		if back, err := tt.k.ParseValue(tt.k.Format(tt.v)); err != nil || back != tt.v {
			t.Errorf("%s: %q read back as %d, %v", tt.k, tt.k.Format(tt.v), back, err)
		}
	}
}

func FuzzParseAssignment(f *testing.F) {
	for _, s := range []string{"sessions=4", "vcpu=0.5", "memory=4GiB", "sandbox_seconds_per_day=8h", "x=", "=", "vcpu=1e308"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, v, err := quota.ParseAssignment(s)
		if err != nil {
			return
		}
		if !k.Valid() || v < quota.Unlimited {
			t.Fatalf("%q gave %s=%d", s, k, v)
		}
	})
}

func TestDefaultsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), quota.DefaultsFile)
	want := quota.Limits{quota.Sessions: 8, quota.VCPU: 2500, quota.EgressBytesPerDay: quota.Unlimited}
	if err := quota.WriteDefaults(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := quota.ReadDefaults(path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("read back %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{`{"nonsense": 1}`, `{"sessions": -5}`, `[`, `{"sessions": "x"}`} {
		os.WriteFile(path, []byte(bad), 0o600)
		if _, err := quota.ReadDefaults(path); err == nil {
			t.Errorf("%s read without error", bad)
		}
	}
}
