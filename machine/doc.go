// Package machine runs a Gorgonia graph with its memory planned once.
//
// New sorts the graph, gives every computed node an output buffer of its
// shape and dtype, and reuses a buffer for a later node once everything
// that reads it has run; RunAll then calls each op's UsePreallocDo into
// its buffer, in the order Gorgonia's TapeMachine uses, on the calling
// goroutine. After the first run a run allocates nothing of its own (each
// of Gorgonia's unary functions on a tensor, Exp, Log, Neg, Sigmoid, Tanh,
// Square and the others, adds the 3 allocations of its in-place call): the
// time a TapeMachine spends allocating every intermediate again (its
// Reset clears every register) and handing the tape to a goroutine of its
// own is gone. Values are bit for bit those of a TapeMachine on the same
// graph, since each op runs the same arithmetic.
//
//	m, err := machine.New(g, machine.WithGrads(learnables...))
//	...
//	for step := range steps {
//		// gorgonia.Let the batch into the inputs
//		if err := m.RunAll(); err != nil { ... }
//		solver.Step(gorgonia.NodesToValueGrads(learnables))
//	}
//
// # What a run leaves
//
// A value or gradient a run produced is valid until the next run
// overwrites it, as PyTorch's .grad is overwritten in place: a caller that
// keeps one across runs clones it (gorgonia.CloneValue). After a run:
//   - node.Value() is the node's value for every node of the forward pass
//     (every node a root that is not a gradient depends on), and for every
//     root;
//   - node.Grad() is the gradient of every input (gorgonia.Grad's wrt
//     nodes), or only of those WithGrads names;
//   - a gradient node that is neither (the gradient of an intermediate)
//     may hold another node's values: name it in Keep to read it;
//   - a gorgonia.Read statement copies its node's value into the Value it
//     was given (the first run clones it, later ones copy into it).
//
// Gradients are those of this run alone, not a sum over runs: a
// TapeMachine with gorgonia.BindDualValues adds each run's gradient to the
// one before, which Gorgonia's solvers clear after a step.
//
// # Inputs
//
// Inputs bound with gorgonia.Let between runs are read at the start of
// each run; an input with no value, or with a value of another shape or
// dtype than its node's, is an error naming the node. Learnables are read
// the same way, so a solver that updates them in place, or binds new
// values, is seen by the next run.
//
// # Ops
//
// Gorgonia's elementwise ops (Add, Sub, HadamardProd, HadamardDiv and the
// comparisons Rectify uses, between tensors of one size or with a
// scalar; Exp, Log, Neg, Sigmoid, Tanh, Square and the other unary
// functions), Sum over every axis, Reshape, Repeat (which BroadcastAdd
// and the gradients of Sum and Mean use), SizeOf and the gradient of Slice
// run through equivalents in this package that write into the buffer what
// the op's Do computes, with the same arithmetic in the same order: their
// UsePreallocDo, where they have one, allocates on every call (and
// Slice's gradient adds into a buffer it does not clear). Every other op
// with UsePreallocDo (MatMul, SoftMax, this module's ops) runs through it.
// An op with neither (Gorgonia's Slice, Concat and Transpose, Sum over
// some axes) runs through its Do on every run, which allocates, and its
// result, which may share an input's memory, is used as it is (Stats
// counts them). Statements other than Read (Gorgonia's Let and Set) are an
// error from New naming the node and its op.
//
// # Concurrency
//
// One machine runs one RunAll at a time: a RunAll while another runs on
// the same machine returns an error. Machines on different graphs run
// concurrently. RunAll after Close is an error wrapping ErrClosed.
package machine
