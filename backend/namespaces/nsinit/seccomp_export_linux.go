package nsinit

// InstallSeccomp installs the sandbox's seccomp allow-list on the calling
// thread (and what it execs). Another backend's init stage uses it as a
// second layer: the microVM guest's init applies it before the agent.
// no_new_privs must be set first.
func InstallSeccomp() error { return installSeccomp() }
