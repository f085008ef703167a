//go:build !unix

package localredis

import "errors"

var errNoPause = errors.New("pausing a node needs SIGSTOP, which this system lacks")

// Pause is not available on this system.
func (c *Cluster) Pause(addr string) error { return errNoPause }

// Resume is not available on this system.
func (c *Cluster) Resume(addr string) error { return errNoPause }
