package fileio

import "testing"

// On Linux the reads go through a ring, unless the kernel refuses one.
func TestRingUsed(t *testing.T) {
	r, err := newRing(8)
	if err != nil {
		t.Skipf("this kernel makes no io_uring ring (%v): ReadRows reads on goroutines", err)
	}
	r.close()
	if !haveRing() {
		t.Fatal("a ring can be made, but ReadRows would not use one")
	}
}
