// Package graphop reads what Gorgonia keeps unexported in the ops a machine
// outside Gorgonia has to run: where a Read statement copies its value.
package graphop

import (
	"reflect"

	"gorgonia.org/gorgonia"
)

// readOpType is the type of the op gorgonia.Read makes.
var readOpType = func() reflect.Type {
	g := gorgonia.NewGraph()
	x := gorgonia.NewScalar(g, gorgonia.Float64)
	var v gorgonia.Value
	return reflect.TypeOf(gorgonia.Read(x, &v).Op())
}()

// ReadInto returns the destination of op if it is the op of a
// gorgonia.Read statement: the *gorgonia.Value that Read was given.
func ReadInto(op gorgonia.Op) (*gorgonia.Value, bool) {
	if op == nil || reflect.TypeOf(op) != readOpType {
		return nil, false
	}
	f := reflect.ValueOf(op).Field(0)
	if f.Kind() != reflect.Pointer || f.Type().Elem() != reflect.TypeFor[gorgonia.Value]() {
		return nil, false
	}
	return (*gorgonia.Value)(f.UnsafePointer()), true
}

// TypeName returns the name of op's type as Go prints it, such as
// "gorgonia.elemUnaryOp", by which a machine recognises Gorgonia's ops.
func TypeName(op gorgonia.Op) string {
	if op == nil {
		return ""
	}
	t := reflect.TypeOf(op)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.String()
}

// Int returns the int field name of op's struct (op or what it points
// to), such as the axis of Gorgonia's sizeOp.
func Int(op gorgonia.Op, name string) (int, bool) {
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return 0, false
	}
	f := v.FieldByName(name)
	if !f.IsValid() || f.Kind() != reflect.Int {
		return 0, false
	}
	return int(f.Int()), true
}

// ScalarUnary returns the functions a Gorgonia elemUnaryOp (Neg, Exp,
// Sigmoid...) applies to a float32 and a float64 scalar: the function its
// Do calls for a scalar input. Either is nil where op has none.
func ScalarUnary(op gorgonia.Op) (f32 func(float32) float32, f64 func(float64) float64) {
	v := reflect.ValueOf(op)
	if v.Kind() != reflect.Struct || v.NumField() == 0 {
		return nil, nil
	}
	inner := v.Field(0) // the embedded ʘUnaryOperator
	if inner.Kind() != reflect.Interface || inner.IsNil() {
		return nil, nil
	}
	p := inner.Elem()
	if p.Kind() != reflect.Pointer || p.Type().Elem().Kind() != reflect.Func {
		return nil, nil
	}
	switch p.Type().Elem().String() {
	case "gorgonia.sf32UnaryOperator":
		return *(*func(float32) float32)(p.UnsafePointer()), nil
	case "gorgonia.sf64UnaryOperator":
		return nil, *(*func(float64) float64)(p.UnsafePointer())
	}
	return nil, nil
}

// Ints returns the []int field name (or a named slice of int) of op's
// struct, such as the axes of Gorgonia's sumOp.
func Ints(op gorgonia.Op, name string) ([]int, bool) {
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil, false
	}
	f := v.FieldByName(name)
	if !f.IsValid() || f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Int {
		return nil, false
	}
	out := make([]int, f.Len())
	for i := range out {
		out[i] = int(f.Index(i).Int())
	}
	return out, true
}

// An ONNXOp is an op of this module that is one ONNX operator (opset
// 13): package onnx writes its node from the op type and the integer
// attributes it returns.
type ONNXOp interface {
	ONNX() (opType string, attrs map[string]int64)
}

// A Reduce is nn.Sum's or nn.Mean's op, which package onnx writes as
// ReduceSum (its axes an input) or ReduceMean (its axes an attribute).
type Reduce interface {
	// Reduction returns whether the op averages, the axes it reduces in
	// increasing order, and whether it keeps them.
	Reduction() (mean bool, axes []int, keepDims bool)
}

// A Bag is nn.EmbeddingBag's op, which package onnx writes as a
// composition of ONNX operators: what it pools and how.
type Bag interface {
	BagSpec() BagSpec
}

// BagSpec says what a bag op pools: Mode 0 sums, 1 averages, 2 takes the
// maximum; its inputs are the table, the ids, then the offsets if
// Offsets (Bags+1 of them if LastOffset) and the weights if Weights; ids
// equal to Pad are skipped if HasPad.
type BagSpec struct {
	Mode                         int
	Bags                         int
	Offsets, Weights, LastOffset bool
	HasPad                       bool
	Pad                          int
}

// A Through is an op of this module whose output is its input Through()
// (a capture of the gradient that passes it): package onnx writes it as
// that input.
type Through interface {
	Through() int
}

// The operators of a Gorgonia elemBinOp, as ElemBinary returns them
// (gorgonia's ʘBinaryOperatorType).
const (
	BinAdd = iota
	BinSub
	BinMul
	BinDiv
	BinPow
	BinLt
	BinGt
	BinLte
	BinGte
	BinEq
	BinNe
)

// ElemBinary returns the operator of op if it is a Gorgonia elemBinOp
// (Add, HadamardProd, Gte...): one of BinAdd to BinNe.
func ElemBinary(op gorgonia.Op) (int, bool) {
	if TypeName(op) != "gorgonia.elemBinOp" {
		return 0, false
	}
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	inner := v.Field(0) // the embedded ʘBinaryOperator: a scalarBinOp or tBinOp
	if inner.Kind() != reflect.Interface || inner.IsNil() {
		return 0, false
	}
	s := inner.Elem()
	if s.Kind() != reflect.Struct || s.NumField() == 0 || s.Field(0).Kind() != reflect.Uint8 {
		return 0, false
	}
	return int(s.Field(0).Uint()), true
}

// The products of a Gorgonia linAlgBinOp, as LinAlg returns them
// (gorgonia's āBinaryOperator).
const (
	MatMul = iota
	MatVecMul
	VecDot
	OuterProd
	BatchedMatMul
)

// LinAlg returns the product op computes if it is a Gorgonia linAlgBinOp
// (gorgonia.Mul, BatchedMatMul...): one of MatMul to BatchedMatMul, and
// whether it transposes its first and second inputs.
func LinAlg(op gorgonia.Op) (kind int, transA, transB, ok bool) {
	if TypeName(op) != "gorgonia.linAlgBinOp" {
		return 0, false, false, false
	}
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	k, a, b := v.Field(0), v.FieldByName("transA"), v.FieldByName("transB")
	if k.Kind() != reflect.Uint8 || a.Kind() != reflect.Bool || b.Kind() != reflect.Bool {
		return 0, false, false, false
	}
	return int(k.Uint()), a.Bool(), b.Bool(), true
}
