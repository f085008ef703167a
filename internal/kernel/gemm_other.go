//go:build !amd64 || purego

package kernel

// Without assembly the micro-kernels are their Go twins.
var (
	microS = microSGo
	microD = microDGo
)

// hasGemmAsm is false: the micro-kernels run in Go.
const hasGemmAsm = false
