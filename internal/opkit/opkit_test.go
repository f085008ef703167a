package opkit

import (
	"hash/fnv"
	"testing"
)

func TestIdentity(t *testing.T) {
	a, b, c := New("Bag", 1, "sum"), New("Bag", 1, "sum"), New("Bag", 1, "mean")
	if a.Hashcode() != b.Hashcode() || a.ID() != "Bag 1 sum" {
		t.Errorf("equal identities hash %d and %d; ID %q", a.Hashcode(), b.Hashcode(), a.ID())
	}
	if a.Hashcode() == c.Hashcode() {
		t.Error("different identities hash alike")
	}
	if a.ReturnsPtr() || a.OverwritesInput() != -1 || a.CallsExtern() {
		t.Error("New: want a new output")
	}
	p := PassThrough("Tap")
	if !p.ReturnsPtr() || p.OverwritesInput() != 0 || p.CallsExtern() {
		t.Error("PassThrough: want the first input returned")
	}
}

// Ops without an identity hash by address: two of them never merge, and
// one hashes the same every time.
func TestZeroOpsNeverMerge(t *testing.T) {
	var x, y Op
	if x.Hashcode() == y.Hashcode() {
		t.Error("two zero Ops hash alike")
	}
	h1, h2 := fnv.New32a(), fnv.New32a()
	x.WriteHash(h1)
	x.WriteHash(h2)
	if h1.Sum32() != h2.Sum32() || x.Hashcode() != h1.Sum32() {
		t.Error("a zero Op's hash changes between calls")
	}
}
