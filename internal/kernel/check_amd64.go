//go:build !purego

package kernel

import "golang.org/x/sys/cpu"

// hasCheckAsm reports whether the processor runs inRange64 and inRange32,
// which use AVX2 instructions.
var hasCheckAsm = cpu.X86.HasAVX2

// inRange64 is inRange64Go in AVX2 assembly, four indices per instruction
// (check_amd64.s). Call it only when hasCheckAsm is set.
//
//go:noescape
func inRange64(p *int64, n int, s int) int

// inRange32 is inRange32Go in AVX2 assembly (check_amd64.s). Call it only
// when hasCheckAsm is set.
//
//go:noescape
func inRange32(p *int32, n int, s int) int
