//go:build !amd64 || purego

package kernel

// Without assembly the micro-kernels are their Go twins.
var (
	kernelS = kernelSGo
	kernelD = kernelDGo
)

// hasGemmAsm is false: the micro-kernels run in Go.
const hasGemmAsm = false
