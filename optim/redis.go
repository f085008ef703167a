package optim

import (
	"embed"

	"github.com/gathergrad/gather/rule"
	"github.com/gathergrad/gather/table"
)

// luaRules holds each optimiser's update of one float32 row on a Redis
// Cluster: lua/<name>.lua, registered with the Redis store under the
// rule's Name.
//
//go:embed lua/*.lua
var luaRules embed.FS

func init() {
	register := func(r Sparse, args func(r Sparse, t int64) []float64) {
		lua, err := luaRules.ReadFile("lua/" + r.Name() + ".lua")
		if err != nil {
			panic("optim: " + err.Error()) // the embedded files are the package's own
		}
		if err := table.RegisterRedisRule(r, table.RedisRule{Lua: string(lua), Args: args}); err != nil {
			panic("optim: " + err.Error()) // optim registers first, under names of its own
		}
	}
	register(&SparseSGD{}, func(r rule.Rule, _ int64) []float64 {
		o := r.(*SparseSGD)
		return []float64{f32(o.LearnRate), f32(o.WeightDecay)}
	})
	register(&SparseAdam{}, func(r rule.Rule, t int64) []float64 {
		o := r.(*SparseAdam)
		c := o.consts32(o.step(t))
		return []float64{float64(c.B1), float64(c.C1), float64(c.B2), float64(c.C2), float64(c.Eps), float64(c.Step), float64(c.Decay)}
	})
	register(&RowWiseAdagrad{}, func(r rule.Rule, _ int64) []float64 {
		o := r.(*RowWiseAdagrad)
		return []float64{o.LearnRate, o.Eps, o.WeightDecay}
	})
	register(&SparseAdagrad{}, func(r rule.Rule, t int64) []float64 {
		o := r.(*SparseAdagrad)
		nclr, _ := o.check(t) // checked by the store's call of Check
		return []float64{f32(nclr), f32(o.Eps)}
	})
}
