package main

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// startPinned starts cmd on cpu alone: the thread that forks it is pinned
// to cpu first, and a child inherits its parent thread's CPU set (so a Go
// child's GOMAXPROCS is 1). A negative cpu, or one the thread may not be
// pinned to, starts cmd unpinned and returns false.
func startPinned(cmd *exec.Cmd, cpu int) (bool, error) {
	if cpu < 0 {
		return false, cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return false, cmd.Start()
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return false, cmd.Start()
	}
	defer unix.SchedSetaffinity(0, &old)
	return true, cmd.Start()
}

// allowedCPUs returns the CPUs process pid may run on, as the kernel lists
// them ("1", "0-1"), or "?".
func allowedCPUs(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
