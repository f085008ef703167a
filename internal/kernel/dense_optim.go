package kernel

import (
	"math"

	"github.com/gathergrad/gather/internal/parallel"
)

// The updates of the dense optimisers, PyTorch's torch.optim arithmetic
// element by element in the parameters' type T, each product rounded
// before it is added. Each is O(len(w)), in parallel over blocks of w
// (each element on its own, so the result does not depend on the split).

// SGDMomentum is PyTorch's SGD step on w with gradient g and momentum
// buffer buf (all one length), which then sets g to zero:
//
//	d := g + wd*w
//	if mom != 0 {
//		buf = d on the first step, else mom*buf + (1-damp)*d
//		d = d + mom*buf with nesterov, else buf
//	}
//	w -= lr * d
//	g = 0
func SGDMomentum[T Float](w, g, buf []T, lr, mom, damp, wd T, nesterov, first bool) {
	t := denseSGDTask[T]{w: w, g: g[:len(w)], buf: buf, lr: lr, mom: mom, damp: damp, wd: wd, nesterov: nesterov, first: first}
	if mom != 0 {
		t.buf = buf[:len(w)]
	}
	parallel.Run((len(w)+sgdBlock-1)/sgdBlock, 3*len(w), t)
}

// sgdBlock is the number of elements a part of SGDMomentum takes at once.
const sgdBlock = 1 << 14

// denseSGDTask is the Task of SGDMomentum over blocks of sgdBlock elements.
type denseSGDTask[T Float] struct {
	w, g, buf         []T
	lr, mom, damp, wd T
	nesterov, first   bool
}

func (t denseSGDTask[T]) Part(lo, hi int) int {
	i0, i1 := lo*sgdBlock, min(hi*sgdBlock, len(t.w))
	w, g := t.w[i0:i1], t.g[i0:i1]
	g = g[:len(w)]
	lr, wd := t.lr, t.wd
	if t.mom == 0 {
		for i, x := range w {
			d := g[i] + T(wd*x)
			w[i] = x - T(lr*d)
			g[i] = 0
		}
		return -1
	}
	buf := t.buf[i0:i1]
	buf = buf[:len(w)]
	mom, damp := t.mom, t.damp
	for i, x := range w {
		d := g[i] + T(wd*x)
		if t.first {
			buf[i] = d
		} else {
			buf[i] = T(mom*buf[i]) + T((1-damp)*d)
		}
		if t.nesterov {
			d += T(mom * buf[i])
		} else {
			d = buf[i]
		}
		w[i] = x - T(lr*d)
		g[i] = 0
	}
	return -1
}

// AdamDense is PyTorch's Adam (AdamW with decoupled) step number step
// (from 1) on w with gradient g and moments m and v:
//
//	d := g + wd*w, or with decoupled d := g and w *= 1 - lr*wd
//	m = b1*m + (1-b1)*d
//	v = b2*v + (1-b2)*d*d
//	w -= lr/(1-b1^step) * m / (sqrt(v)/sqrt(1-b2^step) + eps)
func AdamDense[T Float](w, g, m, v []T, lr, b1, b2, eps, wd float64, step int, decoupled bool) {
	bc1 := 1 - math.Pow(b1, float64(step))
	bc2 := math.Sqrt(1 - math.Pow(b2, float64(step)))
	t := adamDenseTask[T]{w: w, g: g[:len(w)], m: m[:len(w)], v: v[:len(w)], size: T(lr / bc1), shrink: 1,
		b1: T(b1), b2: T(b2), c1: T(1 - b1), c2: T(1 - b2), eps: T(eps), wd: T(wd), bc2: T(bc2)}
	if decoupled {
		t.shrink, t.wd = T(1-lr*wd), 0
	}
	parallel.Run((len(w)+sgdBlock-1)/sgdBlock, 4*len(w), t)
}

// adamDenseConsts32 are adamDenseTask's float32 coefficients in the order
// adamDense32 loads them.
type adamDenseConsts32 struct{ shrink, wd, b1, c1, b2, c2, bc2, eps, size float32 }

// adamDenseTask is the Task of AdamDense over blocks of sgdBlock elements.
type adamDenseTask[T Float] struct {
	w, g, m, v                                 []T
	size, shrink, b1, b2, c1, c2, eps, wd, bc2 T
}

func (t adamDenseTask[T]) Part(lo, hi int) int {
	i0, i1 := lo*sgdBlock, min(hi*sgdBlock, len(t.w))
	w := t.w[i0:i1]
	g, m, v := t.g[i0:i1][:len(w)], t.m[i0:i1][:len(w)], t.v[i0:i1][:len(w)]
	if w32, ok := any(w).([]float32); ok && hasAdamAsm {
		// Eight at a time with AVX, to the same bits.
		if n := len(w) &^ 7; n > 0 {
			g32, m32, v32 := any(g).([]float32)[:n], any(m).([]float32)[:n], any(v).([]float32)[:n]
			c := adamDenseConsts32{float32(t.shrink), float32(t.wd), float32(t.b1), float32(t.c1), float32(t.b2), float32(t.c2), float32(t.bc2), float32(t.eps), float32(t.size)}
			adamDense32(&w32[0], &g32[0], &m32[0], &v32[0], n, &c)
			w, g, m, v = w[n:], g[n:], m[n:], v[n:]
		}
	}
	adamDenseGo(w, g, m, v, t.shrink, t.wd, t.b1, t.c1, t.b2, t.c2, t.bc2, t.eps, t.size)
	return -1
}

// adamDenseGo is adamDenseTask's loop, and adamDense32's Go twin:
//
//	for i := range w { x := w[i]*shrink; d := g[i] + wd*x; m[i] = b1*m[i] + c1*d;
//		v[i] = b2*v[i] + c2*d*d; w[i] = x - size*m[i]/(sqrt(v[i])/bc2 + eps) }
func adamDenseGo[T Float](w, g, m, v []T, shrink, wd, b1, c1, b2, c2, bc2, eps, size T) {
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	for i, x := range w {
		x *= shrink
		d := g[i] + T(wd*x)
		m[i] = T(b1*m[i]) + T(c1*d)
		v[i] = T(b2*v[i]) + T(c2*T(d*d))
		den := T(sqrt(v[i])/bc2) + eps
		w[i] = x - T(size*m[i])/den
	}
}

// AdagradDense is PyTorch's Adagrad step on w with gradient g and the sum
// of squares s, at the rate clr (the learning rate after its decay):
//
//	d := g + wd*w
//	s += d*d
//	w -= clr * d / (sqrt(s) + eps)
func AdagradDense[T Float](w, g, s []T, clr, eps, wd float64) {
	t := adagradDenseTask[T]{w: w, g: g[:len(w)], s: s[:len(w)], clr: T(clr), eps: T(eps), wd: T(wd)}
	parallel.Run((len(w)+sgdBlock-1)/sgdBlock, 3*len(w), t)
}

// adagradDenseTask is the Task of AdagradDense over blocks of sgdBlock
// elements.
type adagradDenseTask[T Float] struct {
	w, g, s      []T
	clr, eps, wd T
}

func (t adagradDenseTask[T]) Part(lo, hi int) int {
	i0, i1 := lo*sgdBlock, min(hi*sgdBlock, len(t.w))
	w := t.w[i0:i1]
	g, s := t.g[i0:i1][:len(w)], t.s[i0:i1][:len(w)]
	for i, x := range w {
		d := g[i] + T(t.wd*x)
		s[i] += T(d * d)
		w[i] = x - T(t.clr*d)/(sqrt(s[i])+t.eps)
	}
	return -1
}

// SumSquares returns the sum of the squares of s, in float64.
func SumSquares[T Float](s []T) float64 {
	var sum float64
	for _, x := range s {
		sum += float64(x) * float64(x)
	}
	return sum
}

// Scale multiplies s by c.
func Scale[T Float](s []T, c T) {
	for i := range s {
		s[i] *= c
	}
}

// sqrt is the square root in T's own precision.
func sqrt[T Float](x T) T { return T(math.Sqrt(float64(x))) }
