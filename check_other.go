//go:build !amd64 || purego

package gather

// checkAssembly is false where the package has no assembly for checking
// indices: checkedPrefix then checks none. It is a variable, as on amd64,
// so that BenchmarkIndexCheck can set it on every platform.
var checkAssembly = false

func inRange64(p *int64, n int, s int) int { panic("gather: inRange64 without assembly") }

func inRange32(p *int32, n int, s int) int { panic("gather: inRange32 without assembly") }
