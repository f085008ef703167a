package wordvec

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/gathergrad/gather/checkpoint"
)

// FuzzRead reads arbitrary bytes as a word-vector file: it never
// panics, every error wraps checkpoint.ErrFormat, a result has one row of
// the vectors per word, and what it reads Write writes and
// Read reads back the same (words without whitespace).
func FuzzRead(f *testing.F) {
	f.Add([]byte("2 3\nthe 0.5 -1 3 \ngopher 1e-3 2 -0\n"))
	f.Add([]byte("a 1 2\n. . . 3 4\n"))
	f.Add([]byte("1 2\nab \x00\x00\x80?\x00\x00\x00@\n"))
	f.Add([]byte("1 2\nab \x00\x00\x80?\x00\x00\x00@"))
	f.Add([]byte("3 1000000000\nx 1\n"))
	// A binary vector whose bytes are digits, "1234": Write's header ends
	// in a space, which makes it binary; without it, it is the text 1234.
	f.Add([]byte("1 1 \nw 1234\n"))
	f.Add([]byte("1 1\nw 1234\n"))
	f.Add([]byte("2 1 \nw 1234\nv 5678\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "in.vec")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		words, vecs, err := Read(path)
		if err != nil {
			if !errors.Is(err, checkpoint.ErrFormat) {
				t.Fatalf("error not wrapping ErrFormat: %v", err)
			}
			return
		}
		if vecs.Shape()[0] != len(words) || vecs.Dims() != 2 {
			t.Fatalf("%d words, vectors of shape %v", len(words), vecs.Shape())
		}
		for _, w := range words {
			if w == "" || strings.IndexFunc(w, unicode.IsSpace) >= 0 {
				return // a word Write refuses (GloVe words with spaces)
			}
		}
		out := filepath.Join(dir, "out.vec")
		for _, bin := range []bool{false, true} {
			if err := Write(out, words, vecs, bin); err != nil {
				t.Fatalf("writing what Read returned: %v", err)
			}
			w2, v2, err := Read(out)
			if err != nil {
				t.Fatalf("reading what Write wrote (binary=%v): %v", bin, err)
			}
			if !slices.Equal(words, w2) {
				t.Fatalf("words changed: %q -> %q", words, w2)
			}
			a, b := vecs.Float32s(), v2.Float32s()
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
					t.Fatalf("binary=%v: value %d changed: %v -> %v", bin, i, a[i], b[i])
				}
			}
		}
	})
}
