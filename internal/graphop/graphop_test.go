package graphop

import (
	"testing"

	"gorgonia.org/gorgonia"
)

func TestReadInto(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewScalar(g, gorgonia.Float64)
	var v gorgonia.Value
	r := gorgonia.Read(x, &v)
	p, ok := ReadInto(r.Op())
	if !ok || p != &v {
		t.Fatalf("ReadInto = %p, %v; want %p", p, ok, &v)
	}
	if _, ok := ReadInto(x.Op()); ok {
		t.Fatal("ReadInto of an input's op: ok")
	}
	y := gorgonia.Must(gorgonia.Neg(x))
	if _, ok := ReadInto(y.Op()); ok {
		t.Fatal("ReadInto of Neg: ok")
	}
	if n := TypeName(y.Op()); n != "gorgonia.elemUnaryOp" {
		t.Fatalf("TypeName(Neg) = %q", n)
	}
}
