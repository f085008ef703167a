package main

import (
	"math"
	"math/rand/v2"
)

// A feature is one id column of the click stream: a pool of live ids,
// drawn by a Zipf law over the pool's slots, of which churn slots get a
// new id every batch, so that ids arrive, live a while and fade. Every
// id has a hidden effect on the click rate, a function of the id alone.
type feature struct {
	pool  []int64
	zipf  *rand.Zipf
	churn int
	r     *rand.Rand
	seed  uint64
}

func newFeature(seed uint64, live, churn int) *feature {
	r := rand.New(rand.NewPCG(seed, 1))
	f := &feature{pool: make([]int64, live), zipf: rand.NewZipf(r, 1.1, 4, uint64(live-1)), churn: churn, r: r, seed: seed}
	for k := range f.pool {
		f.pool[k] = int64(r.Uint64())
	}
	return f
}

// batch writes the ids of n examples to ids, after replacing churn of the
// pool's ids with new ones.
func (f *feature) batch(ids []int64) {
	for range f.churn {
		f.pool[f.r.IntN(len(f.pool))] = int64(f.r.Uint64())
	}
	for k := range ids {
		ids[k] = f.pool[f.zipf.Uint64()]
	}
}

// effect returns id's hidden effect on the logit of a click: N(0, 1).
func (f *feature) effect(id int64) float64 {
	return rand.New(rand.NewPCG(f.seed, uint64(id))).NormFloat64()
}

// clickStream makes the batches: user and item ids, and clicks drawn with
// probability sigmoid(-1 + user effect + item effect).
type clickStream struct {
	user, item *feature
	r          *rand.Rand
}

func newClickStream(seed uint64, live, churn int) *clickStream {
	return &clickStream{user: newFeature(seed+1, live/2, churn/2), item: newFeature(seed+2, live, churn), r: rand.New(rand.NewPCG(seed, 3))}
}

func (s *clickStream) next(users, items []int64, clicks []float32) {
	s.user.batch(users)
	s.item.batch(items)
	for k := range clicks {
		p := 1 / (1 + math.Exp(1-s.user.effect(users[k])-s.item.effect(items[k])))
		clicks[k] = 0
		if s.r.Float64() < p {
			clicks[k] = 1
		}
	}
}
