//go:build !amd64 || purego

package kernel

// hasAdamAsm is false: without assembly, AdamRow32 runs adamRow32Go.
const hasAdamAsm = false

func adamRow32(w, grad, m, v *float32, n int, c *AdamConsts) {
	adamRow32Go(sliceAt(w, n), sliceAt(grad, n), sliceAt(m, n), sliceAt(v, n), c)
}

func adamDense32(w, grad, m, v *float32, n int, c *adamDenseConsts32) {
	adamDenseGo(sliceAt(w, n), sliceAt(grad, n), sliceAt(m, n), sliceAt(v, n), c.shrink, c.wd, c.b1, c.c1, c.b2, c.c2, c.bc2, c.eps, c.size)
}
