// Package killtest kills a test's own binary, run again as a child
// process, at random moments, for tests of what a crash leaves on disk.
//
// A kill proves something only if it landed where the test says: Run
// fails when a child ends on its own, when a child never marks progress,
// and when no kill lands in the window the test is about (a Sync, a
// save), and it logs where each kill landed.
package killtest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gathergrad/gather/internal/fileio"
)

// A Kill is what one kill left: the child's directory and the last
// marker it wrote (Mark), its State and Step.
type Kill struct {
	N     int // 0 for the first kill
	Dir   string
	State string
	Step  int
}

// Config says which test to run as the child and how to kill it.
type Config struct {
	Test  string // the test the child runs
	Env   string // set, in the child, to its directory
	Kills int
	Seed  uint64
	// Window, if not "", is the marker state the test is about (such as
	// "syncing"): every third kill waits for the child to mark it and
	// kills at once, and Run fails unless at least one kill landed while
	// the child's last marker said Window.
	Window string
	// Inside, if not nil, narrows the window to the moments when it
	// reports true of the child's directory (such as while a temporary
	// file exists): an aimed kill waits for it too, and a kill counts as
	// in the window only if it still reports true after the kill.
	Inside func(dir string) bool
}

// in reports whether k, the marker a child left in dir, is in c's window.
func (c Config) in(k Kill) bool {
	return c.Window != "" && k.State == c.Window && (c.Inside == nil || c.Inside(k.Dir))
}

// progressWait bounds the wait for a child's first marker, and for a
// marker of the window.
const progressWait = time.Minute

// Run runs c.Test again, c.Kills times, as a child process with c.Env
// set to a new directory that setup has filled. Once the child has
// written its first marker (Mark), it kills it (SIGKILL) 0 to 300 ms
// later, at moments drawn from c.Seed, or, every third kill with a
// Window, as soon as the marker says Window (and Inside holds); then it
// calls check with what the kill left. The test sees c.Env set and does
// the child's work instead.
//
// Run fails the test if a child exits on its own (its status and output
// are printed), writes no marker within a minute, or is not ended by the
// kill, and, with a Window, if no kill landed in it.
func Run(t *testing.T, c Config, setup func(dir string), check func(k Kill)) {
	t.Helper()
	r := rand.New(rand.NewPCG(c.Seed, c.Seed+1))
	landed := map[string]int{}
	for kill := range c.Kills {
		dir := t.TempDir()
		setup(dir)
		cmd := exec.Command(os.Args[0], "-test.run", "^"+c.Test+"$", "-test.count", "1")
		cmd.Env = append(os.Environ(), c.Env+"="+dir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		exited := func(err error) {
			t.Helper()
			t.Fatalf("kill %d: the child ended on its own before it was killed (%v):\n%s", kill, err, out.Bytes())
		}
		aim := c.Window != "" && kill%3 == 2
		want := func(k Kill) bool { return k.Step >= 0 && (!aim || c.in(k)) }
		end := time.Now().Add(progressWait)
		for k := read(t, dir, kill); !want(k); k = read(t, dir, kill) {
			select {
			case err := <-done:
				exited(err)
			case <-time.After(200 * time.Microsecond):
			}
			if time.Now().After(end) {
				cmd.Process.Kill()
				<-done
				t.Fatalf("kill %d: the child marked no progress (state %q) within %v:\n%s", kill, c.Window, progressWait, out.Bytes())
			}
		}
		if !aim {
			select {
			case err := <-done:
				exited(err)
			case <-time.After(time.Duration(r.IntN(300)) * time.Millisecond):
			}
		}
		if err := cmd.Process.Kill(); err != nil {
			exited(err)
		}
		err := <-done
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !killed(ee) {
			t.Fatalf("kill %d: the child was not ended by the kill (%v):\n%s", kill, err, out.Bytes())
		}
		k := read(t, dir, kill)
		where := k.State
		if c.Inside != nil && k.State == c.Window && !c.in(k) {
			where += " (outside)"
		}
		landed[where]++
		t.Logf("kill %d landed at %s %d", kill, where, k.Step)
		check(k)
	}
	t.Logf("%d kills, by the child's last marker: %v", c.Kills, landed)
	if c.Window != "" && landed[c.Window] == 0 {
		t.Fatalf("none of %d kills landed in the window %q: %v", c.Kills, c.Window, landed)
	}
}

// killed reports whether the process ee describes ended by SIGKILL.
func killed(ee *exec.ExitError) bool {
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// read returns the marker in dir: Step -1 if there is none yet.
func read(t *testing.T, dir string, kill int) Kill {
	t.Helper()
	k := Kill{N: kill, Dir: dir, Step: -1}
	m, err := os.ReadFile(filepath.Join(dir, "marker"))
	if err != nil || len(m) == 0 {
		return k
	}
	if _, err := fmt.Sscanf(string(m), "%s %d", &k.State, &k.Step); err != nil {
		t.Fatalf("kill %d: marker %q", kill, m)
	}
	return k
}

// Mark records, atomically, in dir's marker where the child is: a state
// (such as "syncing" before a Sync of the steps up to step, "synced"
// after it) and a step.
func Mark(dir, state string, step int) error {
	return fileio.WriteAtomic(filepath.Join(dir, "marker"), func(f *os.File) error {
		_, err := fmt.Fprintf(f, "%s %d", state, step)
		return err
	})
}
