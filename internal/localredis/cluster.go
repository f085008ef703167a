// Package localredis starts a real Redis Cluster on this machine, for
// tests and examples: Debian's redis-server, masters and replicas on
// loopback ports in a directory, with a password.
package localredis

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Install is the command that installs the server the tests need.
const Install = "sudo apt-get install -y redis-server"

// Require is the environment variable that makes a missing redis-server
// a failure instead of a skip (.ci/run sets it).
const Require = "GATHER_REQUIRE_REDIS"

// ErrNoServer: redis-server or redis-cli is not installed.
var ErrNoServer = errors.New("needs redis-server and redis-cli: " + Install)

// A Cluster is a running local Redis Cluster.
type Cluster struct {
	Addrs    []string // the masters' and replicas' addresses
	Password string
	// TLS is, for a cluster that speaks TLS alone (StartTLS), a client
	// configuration that trusts its certificates; else nil.
	TLS    *tls.Config
	dir    string
	nodes  map[string]*exec.Cmd
	single bool // one server, not a cluster (StartServer)
}

// Start starts a cluster of masters masters, each with replicas replicas,
// and stops it when the test ends. Without redis-server on the PATH it
// skips the test, naming the install command, unless Require is set.
func Start(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	return start(t, masters, replicas, false)
}

// StartTLS is Start for a cluster that speaks TLS alone, clients and
// cluster bus, with certificates of a new authority (Cluster.TLS).
func StartTLS(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	return start(t, masters, replicas, true)
}

// StartServer starts one Redis server, not a cluster (Addrs holds its
// address), and stops it when the test ends; without redis-server it
// skips as Start does.
func StartServer(t testing.TB) *Cluster {
	t.Helper()
	return start(t, 0, 0, false)
}

func start(t testing.TB, masters, replicas int, withTLS bool) *Cluster {
	t.Helper()
	c, err := launch(t.TempDir(), masters, replicas, withTLS)
	switch {
	case errors.Is(err, ErrNoServer) && os.Getenv(Require) == "":
		t.Skip(err)
	case errors.Is(err, ErrNoServer):
		t.Fatalf("%v (%s is set)", err, Require)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// Launch starts a cluster of masters masters, each with replicas
// replicas, keeping its files in dir, and returns once every node says
// the cluster is ok. Stop stops it.
func Launch(dir string, masters, replicas int) (*Cluster, error) {
	return launch(dir, masters, replicas, false)
}

func launch(dir string, masters, replicas int, withTLS bool) (*Cluster, error) {
	server, err1 := exec.LookPath("redis-server")
	cli, err2 := exec.LookPath("redis-cli")
	if err1 != nil || err2 != nil {
		return nil, ErrNoServer
	}
	c := &Cluster{Password: "gathergrad-" + strconv.FormatUint(rand.Uint64(), 36), dir: dir, nodes: map[string]*exec.Cmd{}, single: masters == 0}
	if withTLS {
		var err error
		if c.TLS, err = makeCerts(dir); err != nil {
			return nil, err
		}
	}
	if err := c.bringUp(server, cli, masters, replicas); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// bringUp starts the nodes, joins them into a cluster and waits until
// every node says it is ok.
func (c *Cluster) bringUp(server, cli string, masters, replicas int) error {
	if c.single {
		addr, err := c.startFree(server, cli)
		c.Addrs = append(c.Addrs, addr)
		return err
	}
	for range masters * (1 + replicas) {
		addr, err := c.startFree(server, cli)
		if err != nil {
			return err
		}
		c.Addrs = append(c.Addrs, addr)
	}
	args := append(c.cliAuth(), "--cluster", "create")
	args = append(args, c.Addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	for _, a := range c.Addrs {
		if err := waitFor(func() bool { return c.clusterOK(cli, a) }, 20*time.Second); err != nil {
			return fmt.Errorf("the cluster did not come up at %s: %w", a, err)
		}
	}
	return nil
}

func (c *Cluster) startNode(server string, port int) error {
	dir := filepath.Join(c.dir, strconv.Itoa(port))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	listen := fmt.Sprintf("port %d\n", port)
	if c.TLS != nil {
		listen = fmt.Sprintf("port 0\ntls-port %d\ntls-cluster yes\ntls-replication yes\ntls-auth-clients no\n"+
			"tls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n", port,
			filepath.Join(c.dir, "node.crt"), filepath.Join(c.dir, "node.key"), filepath.Join(c.dir, "ca.crt"))
	}
	clustered := "cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-node-timeout 2000\n"
	if c.single {
		clustered = ""
	}
	conf := listen + fmt.Sprintf("bind 127.0.0.1\n"+clustered+"dir %s\nsave \"\"\nappendonly no\nrequirepass %s\nmasterauth %s\n"+
		"daemonize no\nlogfile %s\n", dir, c.Password, c.Password, filepath.Join(dir, "log"))
	path := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(server, path)
	if err := cmd.Start(); err != nil {
		return err
	}
	c.nodes["127.0.0.1:"+strconv.Itoa(port)] = cmd
	return nil
}

// startFree starts a node on a free port and waits until it answers. A
// port another process took between freePort and the node's bind (the
// node's log says so) is given up for another, up to five times.
func (c *Cluster) startFree(server, cli string) (string, error) {
	for range 5 {
		port, err := freePort()
		if err != nil {
			return "", err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if err := c.startNode(server, port); err != nil {
			return "", err
		}
		log := filepath.Join(c.dir, strconv.Itoa(port), "log")
		taken := func() bool {
			b, _ := os.ReadFile(log)
			return bytes.Contains(b, []byte("Address already in use"))
		}
		if err := waitFor(func() bool { return c.ping(cli, addr) || taken() }, 10*time.Second); err != nil {
			return "", fmt.Errorf("redis-server at %s did not start: %w", addr, err)
		}
		if !taken() {
			return addr, nil
		}
		c.Kill(addr)
	}
	return "", errors.New("redis-server: five free ports were taken before it could bind them")
}

// Kill ends the node at addr at once (SIGKILL), as a crash would.
func (c *Cluster) Kill(addr string) error {
	cmd, ok := c.nodes[addr]
	if !ok {
		return fmt.Errorf("no node at %s", addr)
	}
	delete(c.nodes, addr)
	if err := cmd.Process.Kill(); err != nil {
		return err
	}
	cmd.Wait() // "signal: killed"
	return nil
}

// Restart starts again the node at addr that Kill ended, with its
// configuration and the cluster's layout it saved (nodes.conf): it
// rejoins the cluster, as a replica of the node that took its place.
func (c *Cluster) Restart(addr string) error {
	if _, ok := c.nodes[addr]; ok {
		return fmt.Errorf("the node at %s is running", addr)
	}
	server, err := exec.LookPath("redis-server")
	if err != nil {
		return ErrNoServer
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return err
	}
	if err := c.startNode(server, p); err != nil {
		return err
	}
	return waitFor(func() bool { return c.ping("", addr) }, 10*time.Second)
}

// Nodes returns the cluster's nodes as the node at addr sees them: each
// node's address, its role ("master" or "slave"), whether it is flagged
// as failing, and, for a replica, its master's address.
func (c *Cluster) Nodes(addr string) ([]Node, error) {
	out, err := c.CLI(addr, "cluster", "nodes")
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, out)
	}
	byID := map[string]string{}
	var fields [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		byID[f[0]] = strings.Split(f[1], "@")[0]
		fields = append(fields, f)
	}
	var nodes []Node
	for _, f := range fields {
		n := Node{Addr: byID[f[0]], Failing: strings.Contains(f[2], "fail")}
		switch {
		case strings.Contains(f[2], "master"):
			n.Role = "master"
		case strings.Contains(f[2], "slave"):
			n.Role, n.Master = "slave", byID[f[3]]
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// A Node is one node of a cluster, as Nodes sees it.
type Node struct {
	Addr    string
	Role    string // "master" or "slave"
	Failing bool
	Master  string // a replica's master
}

// Settled waits, up to d, until every running node says the cluster is
// ok (every slot served by a master it reaches) and each running
// replica's link to its master is up.
func (c *Cluster) Settled(d time.Duration) error {
	return waitFor(func() bool {
		for addr := range c.nodes {
			if !c.clusterOK("", addr) {
				return false
			}
			out, err := c.CLI(addr, "info", "replication")
			if err != nil || (strings.Contains(string(out), "role:slave") && !strings.Contains(string(out), "master_link_status:up")) {
				return false
			}
		}
		return true
	}, d)
}

// Running reports whether the node at addr was started and not killed.
func (c *Cluster) Running(addr string) bool {
	_, ok := c.nodes[addr]
	return ok
}

// Stop stops every node, paused ones too.
func (c *Cluster) Stop() {
	for _, cmd := range c.nodes {
		cmd.Process.Kill()
		cmd.Wait()
	}
	clear(c.nodes)
}

// CLI runs redis-cli against the node at addr with the cluster's password.
func (c *Cluster) CLI(addr string, args ...string) ([]byte, error) {
	host, port, _ := net.SplitHostPort(addr)
	return exec.Command("redis-cli", append(append([]string{"-h", host, "-p", port}, c.cliAuth()...), args...)...).CombinedOutput()
}

// cliAuth returns redis-cli's arguments for the cluster's password and,
// with TLS, its authority.
func (c *Cluster) cliAuth() []string {
	args := []string{"-a", c.Password, "--no-auth-warning"}
	if c.TLS != nil {
		args = append(args, "--tls", "--cacert", filepath.Join(c.dir, "ca.crt"))
	}
	return args
}

func (c *Cluster) ping(cli, addr string) bool {
	out, err := c.CLI(addr, "ping")
	return err == nil && bytes.Contains(out, []byte("PONG"))
}

func (c *Cluster) clusterOK(cli, addr string) bool {
	out, err := c.CLI(addr, "cluster", "info")
	return err == nil && strings.Contains(string(out), "cluster_state:ok")
}

// freePort returns a loopback port that is free, as is the cluster bus's
// port 10000 above it.
func freePort() (int, error) {
	for range 100 {
		// Below Linux's ephemeral ports (32768 up), with the bus port,
		// so that no outgoing connection takes one before the node binds.
		p := 20000 + rand.IntN(2700)
		l1, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		l1.Close()
		if err != nil {
			continue
		}
		l2.Close()
		return p, nil
	}
	return 0, errors.New("no free loopback port")
}

func waitFor(ok func() bool, d time.Duration) error {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if ok() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not within %v", d)
}
