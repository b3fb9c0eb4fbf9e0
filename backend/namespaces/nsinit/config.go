package nsinit

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// InitArg is the first argument that makes the agent binary run the init
// stage instead of the agent.
const InitArg = "__airlock_nsinit"

// File descriptors the host hands the init stage, after stdin, stdout
// (the agent protocol) and stderr (its log).
const (
	ConfigFD = 3 // the host writes the Config as JSON, then closes it
	ReportFD = 4 // the init stage writes one Report, then execs (which closes it)
)

// Config is everything the init stage needs. Paths called host paths are
// resolved before pivot_root; the others inside the new root.
type Config struct {
	Rootfs    string `json:"rootfs"`    // host path of the image's root file system
	Workspace string `json:"workspace"` // host path of the directory mounted at /workspace
	Tmp       string `json:"tmp"`       // host path of the directory mounted at /tmp

	Agent string   `json:"agent"` // the agent inside the new root
	Args  []string `json:"args"`  // the agent's arguments after argv[0]
	Env   []string `json:"env"`   // its whole environment
	Cwd   string   `json:"cwd"`   // its working directory

	Hostname string `json:"hostname"`
	UID      int    `json:"uid"` // inside the sandbox (mapped by the host)
	GID      int    `json:"gid"`

	Rlimits  []Rlimit `json:"rlimits"`
	ShmBytes int64    `json:"shm_bytes"` // size of /dev/shm

	// CgroupTasks are host files (cgroup v1 tasks files) the init stage
	// writes "0" into to move itself into the sandbox's cgroup; empty
	// when the host moves it.
	CgroupTasks []string `json:"cgroup_tasks,omitempty"`

	// Volumes are bound into the new root after the workspace and /tmp.
	Volumes []Volume `json:"volumes,omitempty"`
}

// Volume is a mount the host made for the sandbox (an idmapped mount of
// a volume, its flags set) to bind at Target in the new root.
type Volume struct {
	Source   string `json:"source"` // host path of the mount
	Target   string `json:"target"` // inside the new root: absolute and clean
	ReadOnly bool   `json:"read_only"`
}

// Rlimit is one resource limit set before the agent starts.
type Rlimit struct {
	Resource int    `json:"resource"` // RLIMIT_* number
	Cur      uint64 `json:"cur"`
	Max      uint64 `json:"max"`
}

// Report is what the init stage tells the host before it execs the
// agent, or why it failed.
type Report struct {
	Error string `json:"error,omitempty"`
	Stage string `json:"stage,omitempty"` // where it failed
	// LandlockABI is the Landlock ABI version applied; 0 when the kernel
	// offers none.
	LandlockABI int  `json:"landlock_abi"`
	Seccomp     bool `json:"seccomp"`
}

// Validate checks a config.
func (c *Config) Validate() error {
	for name, p := range map[string]string{"rootfs": c.Rootfs, "workspace": c.Workspace, "tmp": c.Tmp, "agent": c.Agent} {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return fmt.Errorf("nsinit: %s %q must be a clean absolute path", name, p)
		}
	}
	for _, v := range c.Volumes {
		if !filepath.IsAbs(v.Source) || filepath.Clean(v.Source) != v.Source ||
			!filepath.IsAbs(v.Target) || filepath.Clean(v.Target) != v.Target || v.Target == "/" {
			return fmt.Errorf("nsinit: volume %q at %q: paths must be clean and absolute", v.Source, v.Target)
		}
	}
	if c.Cwd == "" {
		c.Cwd = "/workspace"
	}
	if c.UID <= 0 || c.GID <= 0 {
		return fmt.Errorf("nsinit: the sandbox user must not be root")
	}
	if c.Hostname == "" {
		c.Hostname = "sandbox"
	}
	if strings.ContainsRune(c.Hostname, 0) || len(c.Hostname) > 64 {
		return fmt.Errorf("nsinit: bad hostname")
	}
	if c.ShmBytes <= 0 {
		c.ShmBytes = 64 << 20
	}
	return nil
}

// Encode returns the config as the host sends it.
func (c *Config) Encode() ([]byte, error) { return json.Marshal(c) }
