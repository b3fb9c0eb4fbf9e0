//go:build !linux

package guestinit

// RunIfAsked does nothing off Linux.
func RunIfAsked() {}
