//go:build !linux

package localredis

import "os/exec"

// bind does nothing here: a node outlives a program killed before Stop.
func bind(cmd *exec.Cmd) {}
