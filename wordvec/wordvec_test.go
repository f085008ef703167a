package wordvec

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
)

// binaryVectors builds a word2vec binary file of the words and vectors,
// with a newline after each vector (the C tool) or none (gensim).
func binaryVectors(words []string, vecs [][]float32, newline bool) []byte {
	b := []byte(strconv.Itoa(len(words)) + " " + strconv.Itoa(len(vecs[0])) + "\n")
	for i, w := range words {
		b = append(b, w...)
		b = append(b, ' ')
		for _, v := range vecs[i] {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		if newline {
			b = append(b, '\n')
		}
	}
	return b
}

// Read reads the four formats, as their writers lay them out.
func TestReadVectorsFormats(t *testing.T) {
	words := []string{"the", "gopher", "</s>"}
	vecs := [][]float32{{0.5, -1.25, 3}, {1e-3, 2, -0}, {-7.5, 0.125, 42}}
	want := []float32{0.5, -1.25, 3, 1e-3, 2, -0, -7.5, 0.125, 42}
	dir := t.TempDir()
	files := map[string][]byte{
		// word2vec's C tool writes a space after each value, then the newline.
		"word2vec.txt": []byte("3 3\nthe 0.5 -1.25 3 \ngopher 0.001 2 -0 \n</s> -7.5 0.125 42 \n"),
		"fasttext.vec": []byte("3 3\nthe 0.5 -1.25 3\ngopher 0.001 2 -0\n</s> -7.5 0.125 42\n"),
		"glove.txt":    []byte("the 0.5 -1.25 3\ngopher 0.001 2 -0\n</s> -7.5 0.125 42"),
		"c.bin":        binaryVectors(words, vecs, true),
		"gensim.bin":   binaryVectors(words, vecs, false),
	}
	for name, b := range files {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(path, b, 0o600))
			gotWords, got, err := Read(path)
			require.NoError(t, err)
			assert.Equal(t, words, gotWords)
			assert.Equal(t, tensor.Shape{3, 3}, got.Shape())
			assert.Equal(t, want, got.Float32s())
		})
	}
	// GloVe's larger files hold words with spaces: the last D fields are
	// the vector.
	path := filepath.Join(dir, "spaces.txt")
	require.NoError(t, os.WriteFile(path, []byte("a 1 2\n. . . 3 4\n"), 0o600))
	gotWords, got, err := Read(path)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", ". . ."}, gotWords)
	assert.Equal(t, []float32{1, 2, 3, 4}, got.Float32s())
}

// Malformed vector files are ErrFormat errors naming the line or word.
func TestReadVectorsMalformed(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		data string
		msg  string
	}{
		"empty":                     {"", "line 1"},
		"too few vectors":           {"3 2\na 1 2\nb 3 4\n", "2 vectors, the header says 3"},
		"too many vectors":          {"1 2\na 1 2\nb 3 4\n", "line 3: more vectors than the header's 1"},
		"short line":                {"2 3\na 1 2 3\nb 1 2\n", "line 3: 3 fields, want a word and 3 numbers"},
		"long line with header":     {"1 2\na b 1 2\n", "line 2: 4 fields"},
		"not a number":              {"a 1 2\nb 1 x\n", `line 2: "x" is not a number`},
		"GloVe line, extra numbers": {"a 1 2\nb 3 4 5\n", "line 2: 4 fields, want a word and 2 numbers: the 1 extra are numbers"},
		"one field":                 {"word\n", "line 1"},
		"huge header":               {"1000000000 1000000000\na 1\n", "more than the file's"},
		"binary truncated":          {string(binaryVectors([]string{"a", "b"}, [][]float32{{1, 2}, {3, 4}}, true)[:20]), "word 2"},
		"binary junk at the end":    {string(binaryVectors([]string{"a"}, [][]float32{{1, 2}}, true)) + "xyz", "data after the 1 vectors"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
			require.NoError(t, os.WriteFile(path, []byte(c.data), 0o600))
			var err error
			require.NotPanics(t, func() { _, _, err = Read(path) })
			require.ErrorIs(t, err, checkpoint.ErrFormat)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
}

// Write writes text and binary files that Read reads back
// exactly, from float32 and float64 vectors.
func TestWriteVectorsRoundTrip(t *testing.T) {
	words := []string{"α", "b", "c"}
	vals := []float32{0.1, float32(math.Pi), -1e-30, 3e38, 0, -2.5}
	dir := t.TempDir()
	for _, bin := range []bool{false, true} {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			var v tensor.Tensor = tensor.New(tensor.WithShape(3, 2), tensor.WithBacking(append([]float32{}, vals...)))
			if dt == tensor.Float64 {
				f := make([]float64, len(vals))
				for i, x := range vals {
					f[i] = float64(x)
				}
				v = tensor.New(tensor.WithShape(3, 2), tensor.WithBacking(f))
			}
			path := filepath.Join(dir, "v")
			require.NoError(t, Write(path, words, v, bin))
			gotWords, got, err := Read(path)
			require.NoError(t, err)
			assert.Equal(t, words, gotWords)
			assert.Equal(t, vals, got.Float32s(), "binary=%v %v", bin, dt)
		}
	}
	v := tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]float32{1, 2}))
	require.ErrorIs(t, Write(filepath.Join(dir, "w"), []string{"a b", "c"}, v, false), gather.ErrOption)
	require.ErrorIs(t, Write(filepath.Join(dir, "w"), []string{"a"}, v, false), gather.ErrShape)
}

// A binary vector whose bytes are printable digits reads back as itself,
// and the same bytes with a header of no trailing space read as text.
func TestBinaryOfDigits(t *testing.T) {
	dir := t.TempDir()
	digits := math.Float32frombits(0x34333231) // little-endian "1234"
	for _, vals := range [][]float32{{digits}, {digits, digits}} {
		words := []string{"w", "v"}[:len(vals)]
		vecs := tensor.New(tensor.WithShape(len(vals), 1), tensor.WithBacking(vals))
		for _, bin := range []bool{true, false} {
			path := filepath.Join(dir, "d.vec")
			require.NoError(t, Write(path, words, vecs, bin))
			gw, gv, err := Read(path)
			require.NoError(t, err, "binary=%v", bin)
			require.Equal(t, words, gw)
			require.Equal(t, vals, gv.Float32s(), "binary=%v", bin)
		}
	}
	path := filepath.Join(dir, "text.vec")
	require.NoError(t, os.WriteFile(path, []byte("1 1\nw 1234\n"), 0o644))
	_, v, err := Read(path)
	require.NoError(t, err)
	require.Equal(t, []float32{1234}, v.Float32s())
}
