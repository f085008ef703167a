//go:build !linux

package main

import "os/exec"

// startPinned starts cmd unpinned: pinning is Linux's here.
func startPinned(cmd *exec.Cmd, cpu int) (bool, error) { return false, cmd.Start() }

func allowedCPUs(pid int) string { return "?" }
