//go:build !purego

#include "textflag.h"

// func prefetch(p unsafe.Pointer, n uintptr)
//
// PREFETCHT0 for each 64-byte line of [p, p+n), and for the line of p when
// n is 0. A prefetch never faults, whatever the address.
TEXT ·prefetch(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX

loop:
	PREFETCHT0 (AX)
	ADDQ       $64, AX
	SUBQ       $64, CX
	JGT        loop
	RET
