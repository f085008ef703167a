package kernel

import "math"

// AdamConsts are the coefficients of one Adam step (see AdamRow32), in the
// order adamRow32's assembly loads them.
type AdamConsts struct {
	B1, C1 float32 // β1 and 1-β1
	B2, C2 float32 // β2 and 1-β2
	Eps    float32
	Step   float32 // the learning rate with both bias corrections
	Decay  float32 // 1 - lr·weight decay
}

// AdamRow32 is one Adam step of a float32 row w with gradient g and
// moments m and v (all of w's length), in float32:
//
//	m = β1·m + (1-β1)·g
//	v = β2·v + ((1-β2)·g)·g
//	w = w·decay - (step·m) / (sqrt(v) + eps)
//
// each product and quotient rounded to float32 before it is added (no
// fused multiply-add), so that the result does not depend on the
// processor. g, m and v must be at least as long as w.
func AdamRow32(w, g, m, v []float32, c *AdamConsts) {
	n := 0
	if hasAdamAsm {
		n = len(w) &^ 7
		if n > 0 {
			g, m, v := g[:n], m[:n], v[:n]
			adamRow32(&w[0], &g[0], &m[0], &v[0], n, c)
		}
	}
	adamRow32Go(w[n:], g[n:], m[n:], v[n:], c)
}

// adamRow32Go is AdamRow32 one element at a time, the reference for
// adamRow32.
func adamRow32Go(w, g, m, v []float32, c *AdamConsts) {
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	for j, x := range g {
		mj := float32(c.B1*m[j]) + float32(c.C1*x)
		vj := float32(c.B2*v[j]) + float32(float32(c.C2*x)*x)
		m[j], v[j] = mj, vj
		// The square root of a float32 taken in float64 and rounded is
		// the correctly rounded float32 square root, as VSQRTPS gives.
		w[j] = float32(w[j]*c.Decay) - float32(c.Step*mj)/(float32(math.Sqrt(float64(vj)))+c.Eps)
	}
}
