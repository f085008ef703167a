package main

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"

	"github.com/cespare/xxhash/v2"

	"github.com/gathergrad/gather/metrics"
)

// synthesize writes n lines of Criteo's format to path, drawn from a
// known model: each categorical column's ids are Zipf over a vocabulary
// of its own, each id with a weight; the integers are counts; a line's
// click probability is the sigmoid of a bias, the ids' weights and the
// integers' log(1+x) weighted. It returns that model's own AUC (the
// Bayes AUC: no model of the features does better) over the lines the
// held-out split keeps.
func synthesize(path string, n int, seed uint64, heldOut func(line []byte) bool) (float64, error) {
	r := rand.New(rand.NewPCG(seed, 99))
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	vocab := make([]int, 26)
	weights := make([][]float64, 26)
	ids := make([][]uint32, 26)
	zipf := make([]*rand.Zipf, 26)
	for k := range vocab {
		vocab[k] = 20 + r.IntN(2000)
		weights[k], ids[k] = make([]float64, vocab[k]), make([]uint32, vocab[k])
		for i := range vocab[k] {
			weights[k][i], ids[k][i] = 0.4*r.NormFloat64(), r.Uint32()
		}
		zipf[k] = rand.NewZipf(r, 1.1, 1, uint64(vocab[k]-1))
	}
	dense := make([]float64, 13)
	for j := range dense {
		dense[j] = 0.15 * r.NormFloat64()
	}
	m, err := metrics.NewBinary(metrics.Options{Window: n})
	if err != nil {
		return 0, err
	}
	var line []byte
	for range n {
		z := -1.5
		var fields []byte
		for j := range 13 {
			fields = append(fields, '\t')
			if r.IntN(6) == 0 {
				continue // missing
			}
			x := r.IntN(1 + r.IntN(200))
			z += dense[j] * math.Log1p(float64(x))
			fields = strconv.AppendInt(fields, int64(x), 10)
		}
		for k := range 26 {
			fields = append(fields, '\t')
			if r.IntN(12) == 0 {
				continue
			}
			i := zipf[k].Uint64()
			z += weights[k][i]
			fields = fmt.Appendf(fields, "%08x", ids[k][i])
		}
		p := 1 / (1 + math.Exp(-z))
		label := byte('0')
		if r.Float64() < p {
			label = '1'
		}
		line = append(append(line[:0], label), fields...)
		if heldOut(line) {
			if err := m.Update([]float32{float32(p)}, []float32{float32(label - '0')}); err != nil {
				return 0, err
			}
		}
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	return m.Window().AUC, nil
}

// inSplit reports whether line falls in buckets [from, to) of 100, as
// feed.Split keeps it.
func inSplit(line []byte, from, to uint64) bool {
	h := xxhash.Sum64(line) % 100
	return h >= from && h < to
}
