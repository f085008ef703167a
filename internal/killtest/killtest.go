// Package killtest kills a test's own binary, run again as a child
// process, at random moments, for tests of what a crash leaves on disk.
package killtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gathergrad/gather/internal/fileio"
)

// A Kill is what one kill left: the child's directory and the last
// marker it wrote (Mark): State "synced" or "syncing" and Step; "synced"
// and -1 if it wrote none.
type Kill struct {
	N     int // 0 for the first kill
	Dir   string
	State string
	Step  int
}

// Run runs the test named test again, n times, as a child process with
// the environment variable env set to a new directory that setup has
// filled, kills it (SIGKILL) 20 to 420 ms after it starts, at moments
// drawn from seed, and calls check with what each kill left. The test
// sees env set and does the child's work instead (see Mark).
func Run(t *testing.T, test, env string, n int, seed uint64, setup func(dir string), check func(k Kill)) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed+1))
	for kill := range n {
		dir := t.TempDir()
		setup(dir)
		cmd := exec.Command(os.Args[0], "-test.run", "^"+test+"$", "-test.count", "1")
		cmd.Env = append(os.Environ(), env+"="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(20+r.IntN(400)) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		k := Kill{N: kill, Dir: dir, State: "synced", Step: -1}
		if m, _ := os.ReadFile(filepath.Join(dir, "marker")); len(m) > 0 {
			if _, err := fmt.Sscanf(string(m), "%s %d", &k.State, &k.Step); err != nil {
				t.Fatalf("kill %d: marker %q", kill, m)
			}
		}
		check(k)
	}
}

// Mark records, atomically, in dir's marker what a crash may leave: state
// "syncing" before a Sync of the steps up to step, "synced" after it.
func Mark(dir, state string, step int) error {
	return fileio.WriteAtomic(filepath.Join(dir, "marker"), func(f *os.File) error {
		_, err := fmt.Fprintf(f, "%s %d", state, step)
		return err
	})
}
