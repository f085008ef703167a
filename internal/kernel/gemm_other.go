//go:build !amd64 || purego

package kernel

// Without assembly the micro-kernels are their Go twins.
var (
	microS  = microSGo
	microD  = microDGo
	directS func(kc int, ap, bp, c []float32, ldc int, add bool)
	directD func(kc int, ap, bp, c []float64, ldc int, add bool)
)

// hasGemmAsm is false: the micro-kernels run in Go.
const hasGemmAsm = false
