package onnx

import (
	"encoding/json"
	"math"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/graphop"
	"github.com/gathergrad/gather/internal/onnxpb"
)

// The ONNX operators a bag is written with (opset 13): Gather, Mul,
// Unsqueeze, Equal, Not, Cast, GreaterOrEqual, ReduceSum, Sub, MatMul,
// Max, Div, Where, ReduceMax, Slice.

// bag writes the bag op of n, whose inputs have the value names in, as a
// composition that ONNX Runtime runs, and returns its output's name:
//
//	rows = Gather(table, ids) · weights
//	m[b][i] = 1 if id i is in bag b and is not the padding id
//	sum = m · rows; mean = sum / max(Σᵢ m[b][i], 1);
//	max = ReduceMax over i of (m ? rows : -inf), 0 for a bag with no id
//
// Bags given by ids [bags, k] pool along axis 1; bags given by offsets
// find each id's bag as the number of offsets at or below its position,
// minus one.
func (e *exporter) bag(n *gorgonia.Node, s graphop.BagSpec, in []string) (string, error) {
	nodes, inits := len(e.gp.Node), len(e.gp.Initializer)
	out, err := e.bagNodes(n, s, in)
	if err != nil {
		return "", err
	}
	// Every part of the composition says so, and its last node says what
	// it computes, so that Import reads the bag back as one op.
	for _, np := range e.gp.Node[nodes:] {
		np.DocString = ptr(bagPart)
	}
	for _, t := range e.gp.Initializer[inits:] {
		t.DocString = ptr(bagPart)
	}
	spec, err := json.Marshal(bagDoc{Spec: s, Inputs: in})
	if err != nil {
		return "", err
	}
	e.gp.Node[len(e.gp.Node)-1].DocString = ptr(bagMark + string(spec))
	return out, nil
}

// The doc strings of a bag's composition: bagPart on each of its nodes
// and initializers but the last node, which holds bagMark and its
// bagDoc.
const (
	bagPart = "gathergrad: part of an EmbeddingBag"
	bagMark = "gathergrad: EmbeddingBag "
)

// bagDoc is what the last node of a bag's composition says of it: the
// op and the names of its inputs (table, ids, then offsets and weights
// as the spec has them).
type bagDoc struct {
	Spec   graphop.BagSpec
	Inputs []string
}

// bagNodes writes the composition of bag.
func (e *exporter) bagNodes(n *gorgonia.Node, s graphop.BagSpec, in []string) (string, error) {
	kids := children(n)
	table, ids := kids[0], kids[1]
	dt := table.Dtype()
	et, _ := elemType(dt)
	float := func(v float64) (string, error) {
		if dt == tensor.Float32 {
			return e.constant(tensor.New(tensor.FromScalar(float32(v))))
		}
		return e.constant(tensor.New(tensor.FromScalar(v)))
	}
	ints := func(v ...int64) (string, error) {
		return e.constant(tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(v)))
	}
	cast := func(x string, to onnxpb.TensorProto_DataType) string {
		return e.emit("Cast", []*onnxpb.AttributeProto{intAttr("to", int64(to))}, x)
	}
	unsqueeze := func(x string, axis int64) (string, error) {
		a, err := ints(axis)
		if err != nil {
			return "", err
		}
		return e.emit("Unsqueeze", nil, x, a), nil
	}
	rows := e.emit("Gather", []*onnxpb.AttributeProto{intAttr("axis", 0)}, in[0], in[1])
	offsets, weights := "", ""
	k := 2
	if s.Offsets {
		offsets, k = in[k], k+1
	}
	if s.Weights {
		weights = in[k]
	}
	// along is the axis of rows the bag pools over; m is the mask of
	// (bag, id), of rows' dtype, broadcast against rows.
	var m string
	var along int64
	var err error
	if !s.Offsets {
		along = 1 // rows [bags, k, dim]
		if weights != "" {
			w, err := unsqueeze(weights, 2)
			if err != nil {
				return "", err
			}
			rows = e.emit("Mul", nil, rows, w)
		}
		one, err := float(1)
		if err != nil {
			return "", err
		}
		m = e.emit("Expand", nil, one, e.emit("Shape", nil, in[1])) // [bags, k] of ones
	} else {
		along = 1 // m [bags, n], then [bags, n, 1] against rows [1, n, dim]
		if weights != "" {
			w, err := unsqueeze(weights, 1)
			if err != nil {
				return "", err
			}
			rows = e.emit("Mul", nil, rows, w)
		}
		nIDs := int64(ids.Shape()[0])
		pos := make([]int64, nIDs)
		for i := range pos {
			pos[i] = int64(i)
		}
		posName, err := ints(pos...)
		if err != nil {
			return "", err
		}
		off := cast(offsets, onnxpb.TensorProto_INT64)
		if s.LastOffset {
			start, err := ints(0)
			if err != nil {
				return "", err
			}
			end, err := ints(int64(s.Bags))
			if err != nil {
				return "", err
			}
			off = e.emit("Slice", nil, off, start, end)
		}
		pc, err := unsqueeze(posName, 1) // [n, 1]
		if err != nil {
			return "", err
		}
		oc, err := unsqueeze(off, 0) // [1, bags]
		if err != nil {
			return "", err
		}
		ge := cast(e.emit("GreaterOrEqual", nil, pc, oc), onnxpb.TensorProto_INT64) // [n, bags]
		axis1, err := ints(1)
		if err != nil {
			return "", err
		}
		one, err := ints(1)
		if err != nil {
			return "", err
		}
		seg := e.emit("Sub", nil, e.emit("ReduceSum", []*onnxpb.AttributeProto{intAttr("keepdims", 0)}, ge, axis1), one) // [n]
		bagIdx := make([]int64, s.Bags)
		for b := range bagIdx {
			bagIdx[b] = int64(b)
		}
		bi, err := ints(bagIdx...)
		if err != nil {
			return "", err
		}
		bc, err := unsqueeze(bi, 1) // [bags, 1]
		if err != nil {
			return "", err
		}
		sc, err := unsqueeze(seg, 0) // [1, n]
		if err != nil {
			return "", err
		}
		m = cast(e.emit("Equal", nil, bc, sc), et) // [bags, n]
	}
	if s.HasPad {
		pad, err := e.constant(tensor.New(tensor.FromScalar(int64(s.Pad))))
		if err != nil {
			return "", err
		}
		keep := cast(e.emit("Not", nil, e.emit("Equal", nil, cast(in[1], onnxpb.TensorProto_INT64), pad)), et)
		if s.Offsets {
			if keep, err = unsqueeze(keep, 0); err != nil { // [1, n]
				return "", err
			}
		}
		m = e.emit("Mul", nil, m, keep)
	}
	axes, err := ints(along)
	if err != nil {
		return "", err
	}
	count := e.emit("ReduceSum", []*onnxpb.AttributeProto{intAttr("keepdims", 1)}, m, axes) // [bags, 1]
	switch s.Mode {
	case 0, 1: // sum, mean
		var sum string
		if s.Offsets {
			sum = e.emit("MatMul", nil, m, rows)
		} else {
			m3, err := unsqueeze(m, 2)
			if err != nil {
				return "", err
			}
			sum = e.emit("ReduceSum", []*onnxpb.AttributeProto{intAttr("keepdims", 0)}, e.emit("Mul", nil, rows, m3), axes)
		}
		if s.Mode == 0 {
			return e.finish(n, sum)
		}
		one, err := float(1)
		if err != nil {
			return "", err
		}
		return e.finish(n, e.emit("Div", nil, sum, e.emit("Max", nil, count, one)))
	default: // max
		m3, err := unsqueeze(m, 2) // [bags, n or k, 1]
		if err != nil {
			return "", err
		}
		r3 := rows
		if s.Offsets {
			if r3, err = unsqueeze(rows, 0); err != nil { // [1, n, dim]
				return "", err
			}
		}
		ninf, err := float(math.Inf(-1))
		if err != nil {
			return "", err
		}
		zero, err := float(0)
		if err != nil {
			return "", err
		}
		masked := e.emit("Where", nil, cast(m3, onnxpb.TensorProto_BOOL), r3, ninf)
		mx := e.emit("ReduceMax", []*onnxpb.AttributeProto{intsAttr("axes", along), intAttr("keepdims", 0)}, masked)
		nonEmpty := cast(e.emit("Greater", nil, count, zero), onnxpb.TensorProto_BOOL)
		return e.finish(n, e.emit("Where", nil, nonEmpty, mx, zero))
	}
}

// emit writes a node of op type t and returns its output's name.
func (e *exporter) emit(t string, attrs []*onnxpb.AttributeProto, in ...string) string {
	out := e.fresh(t)
	e.gp.Node = append(e.gp.Node, &onnxpb.NodeProto{OpType: &t, Name: &out, Input: in, Output: []string{out}, Attribute: attrs})
	return out
}

// finish records name as n's value.
func (e *exporter) finish(n *gorgonia.Node, name string) (string, error) {
	e.names[n] = name
	return name, nil
}

func intAttr(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: &name, I: &v, Type: onnxpb.AttributeProto_INT.Enum()}
}

func intsAttr(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: &name, Ints: v, Type: onnxpb.AttributeProto_INTS.Enum()}
}
