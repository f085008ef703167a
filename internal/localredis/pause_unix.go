//go:build unix

package localredis

import (
	"fmt"
	"syscall"
)

// Pause stops the node at addr (SIGSTOP), as a machine that hangs: it
// keeps its connections but answers nothing until Resume.
func (c *Cluster) Pause(addr string) error { return c.signal(addr, syscall.SIGSTOP) }

// Resume resumes the node at addr that Pause stopped (SIGCONT).
func (c *Cluster) Resume(addr string) error { return c.signal(addr, syscall.SIGCONT) }

func (c *Cluster) signal(addr string, sig syscall.Signal) error {
	cmd, ok := c.nodes[addr]
	if !ok {
		return fmt.Errorf("no node at %s", addr)
	}
	return cmd.Process.Signal(sig)
}
