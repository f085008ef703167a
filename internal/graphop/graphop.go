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
