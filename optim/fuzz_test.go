package optim

import (
	"slices"
	"testing"

	"gorgonia.org/tensor"
)

// Every sparse optimiser reads the rows (and slots) a gradient names: any
// rows and slots, in range or not, in order or not, step the table or
// are an error that leaves it, its state and its step count as they
// were; never a panic or a write outside the rows named.
func FuzzSparseStep(f *testing.F) {
	f.Add([]byte{4, 2, 1, 3, 0, 2, 1}, false)
	f.Add([]byte{3, 1, 2, 2, 9, 0}, true)
	f.Add([]byte{5, 3, 0, 4, 1, 255, 2}, true)
	f.Fuzz(func(t *testing.T, b []byte, slotted bool) {
		if len(b) < 2 {
			return
		}
		vocab, dim := int(b[0]%6)+1, int(b[1]%4)+1
		rows := make([]int64, 0, len(b)-2)
		for _, x := range b[2:min(len(b), 12)] {
			rows = append(rows, int64(int8(x))) // negative ids too
		}
		var slots []int64
		if slotted {
			for k := range rows {
				slots = append(slots, int64(int(int8(b[2+k]))%(vocab+1)))
			}
		}
		for _, opt := range []Sparse{&SparseSGD{LearnRate: 0.1, WeightDecay: 0.01}, NewSparseAdam(0.1), NewRowWiseAdagrad(0.1),
			&SparseAdagrad{LearnRate: 0.1, InitialAccumulatorValue: 0.5, Eps: 1e-10}} {
			w := make([]float32, vocab*dim)
			for i := range w {
				w[i] = float32(i) * 0.25
			}
			tab, err := NewMemoryTable(tensor.New(tensor.WithShape(vocab, dim), tensor.WithBacking(w)), opt)
			if err != nil {
				t.Fatal(err)
			}
			vals := make([]float32, len(rows)*dim)
			for i := range vals {
				vals[i] = 1
			}
			g := &RowGrad{Rows: rows, Values: tensor.New(tensor.WithShape(len(rows), dim), tensor.WithBacking(vals))}
			before := slices.Clone(w)
			var state [][]float32
			for _, st := range tab.State {
				state = append(state, slices.Clone(st.Float32s()))
			}
			err = opt.StepRows(Rows{Weight: tab.Weight, State: tab.State, Slots: slots, Step: 1}, g)
			named := map[int64]bool{}
			for k, r := range rows {
				if slots != nil {
					r = slots[k]
				}
				named[r] = true
			}
			for r := range vocab {
				changed := !slices.Equal(before[r*dim:(r+1)*dim], w[r*dim:(r+1)*dim])
				if changed && (err != nil || !named[int64(r)]) {
					t.Fatalf("%T: row %d changed (rows %v, slots %v, error %v)", opt, r, rows, slots, err)
				}
			}
			if err != nil {
				for k, st := range tab.State {
					if !slices.Equal(state[k], st.Float32s()) {
						t.Fatalf("%T: a refused step changed the state", opt)
					}
				}
			}
		}
	})
}
