package table

import "testing"

// FuzzIDIndex holds the id index against a Go map through puts and
// deletes of ids that collide often (a table of 8 or 16 slots).
func FuzzIDIndex(f *testing.F) {
	f.Add([]byte{1, 9, 17, 129, 1, 9, 3, 3})
	f.Add([]byte{0, 8, 16, 24, 32, 40, 0, 16})
	f.Fuzz(func(t *testing.T, b []byte) {
		x := newIDIndex(5)
		ref := map[int64]int32{}
		for k, c := range b {
			id := int64(int8(c>>1)) << 58 >> (c & 7) // few bits set: many share a home
			if _, ok := ref[id]; ok && c&1 == 1 {
				x.del(id)
				delete(ref, id)
			} else if !ok && len(ref) < 6 {
				x.put(id, int32(k))
				ref[id] = int32(k)
			}
			if x.n != len(ref) {
				t.Fatalf("%d ids, want %d", x.n, len(ref))
			}
			for id, want := range ref {
				if got, ok := x.get(id); !ok || got != want {
					t.Fatalf("id %d: row %d %v, want %d", id, got, ok, want)
				}
			}
		}
	})
}
