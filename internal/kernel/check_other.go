//go:build !amd64 || purego

package kernel

// hasCheckAsm is false: without assembly, checkedPrefix leaves every index
// to firstBad's loop, which is as fast as inRange64Go.
const hasCheckAsm = false

func inRange64(p *int64, n int, s int) int { return inRange64Go(p, n, s) }

func inRange32(p *int32, n int, s int) int { return inRange32Go(p, n, s) }
