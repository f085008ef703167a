package main

import (
	"math"
	"math/rand/v2"
)

// The click data: each example has three categorical features, a bag of
// ids each (features[f] ids of vocab[f], drawn by a Zipf law, as users,
// items and categories are), four dense features and a 0/1 label. A
// hidden teacher of the same form labels them: an effect per id (mean
// over the bag), a linear term of the dense features and a bias, through
// a sigmoid.
var (
	vocab   = [3]int{100_000, 10_000, 1_000}
	bagSize = [3]int{4, 3, 1}
)

const denseFeatures = 4

// A batch holds examples' ids (feature f: bagSize[f] per example, one
// after another), dense features (row-major) and labels.
type batch struct {
	ids    [3][]int64
	dense  []float32
	labels []float32
}

func (b *batch) len() int { return len(b.labels) }

// examples returns n examples of the stream seed draws: the training set
// and the held-out set are two seeds of one teacher.
func examples(teacherSeed, seed uint64, n int) *batch {
	t := rand.New(rand.NewPCG(teacherSeed, 1))
	var effect [3][]float64
	for f := range effect {
		effect[f] = make([]float64, vocab[f])
		for i := range effect[f] {
			effect[f][i] = 0.8 * t.NormFloat64()
		}
	}
	var u [denseFeatures]float64
	for j := range u {
		u[j] = 0.5 * t.NormFloat64()
	}
	r := rand.New(rand.NewPCG(teacherSeed, seed))
	var zipf [3]*rand.Zipf
	for f := range zipf {
		zipf[f] = rand.NewZipf(r, 1.05, 2, uint64(vocab[f]-1))
	}
	b := &batch{dense: make([]float32, n*denseFeatures), labels: make([]float32, n)}
	for f := range b.ids {
		b.ids[f] = make([]int64, n*bagSize[f])
	}
	for i := range n {
		logit := -0.5
		for f := range b.ids {
			sum := 0.0
			for k := range bagSize[f] {
				id := zipf[f].Uint64()
				b.ids[f][i*bagSize[f]+k] = int64(id)
				sum += effect[f][id]
			}
			logit += sum / float64(bagSize[f])
		}
		for j := range denseFeatures {
			x := r.NormFloat64()
			b.dense[i*denseFeatures+j] = float32(x)
			logit += u[j] * x
		}
		if r.Float64() < 1/(1+math.Exp(-logit)) {
			b.labels[i] = 1
		}
	}
	return b
}

// slice returns the examples of b at positions pos.
func (b *batch) slice(pos []int) *batch {
	out := &batch{dense: make([]float32, 0, len(pos)*denseFeatures), labels: make([]float32, 0, len(pos))}
	for _, i := range pos {
		for f := range out.ids {
			out.ids[f] = append(out.ids[f], b.ids[f][i*bagSize[f]:(i+1)*bagSize[f]]...)
		}
		out.dense = append(out.dense, b.dense[i*denseFeatures:(i+1)*denseFeatures]...)
		out.labels = append(out.labels, b.labels[i])
	}
	return out
}
