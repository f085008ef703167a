//go:build !amd64 || purego

package kernel

import "unsafe"

// hasAdamAsm is false: without assembly, AdamRow32 runs adamRow32Go.
const hasAdamAsm = false

func adamRow32(w, grad, m, v *float32, n int, c *AdamConsts) {
	adamRow32Go(unsafe.Slice(w, n), unsafe.Slice(grad, n), unsafe.Slice(m, n), unsafe.Slice(v, n), c)
}
