package localredis

import (
	"os/exec"
	"syscall"
)

// bind makes the node end when the process that started it ends, so that
// a program killed leaves no server behind.
func bind(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
