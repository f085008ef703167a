package cluster

import (
	"fmt"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/localredis"
)

// A Local is a Redis Cluster of servers on this machine (StartLocal).
type Local struct {
	// Options reach the cluster: its masters' addresses and password.
	Options Options
	c       *localredis.Cluster
}

// StartLocal starts a Redis Cluster of masters servers on loopback
// ports, with a password of its own, keeping their files in dir, and
// returns once every server says the cluster is ok: for an example or a
// test on one machine. It runs redis-server and redis-cli from the PATH
// (Debian's redis-server package); without them it is an error naming
// the install. Stop stops it.
func StartLocal(dir string, masters int) (*Local, error) {
	if masters < 3 {
		return nil, fmt.Errorf("cluster: a Redis Cluster has at least 3 masters, not %d: %w", masters, errs.ErrOption)
	}
	c, err := localredis.Launch(dir, masters, 0)
	if err != nil {
		return nil, fmt.Errorf("cluster: starting local servers: %w", err)
	}
	return &Local{Options: Options{Addrs: c.Addrs, Password: c.Password}, c: c}, nil
}

// Stop stops the servers.
func (l *Local) Stop() { l.c.Stop() }
