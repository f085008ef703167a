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

// func prefetchLines(addrs *[rowsAhead]uintptr, n int, size uintptr)
//
// Prefetches the size bytes at each of addrs[0], ..., addrs[n-1], as
// prefetch does.
TEXT ·prefetchLines(SB), NOSPLIT, $0-24
	MOVQ  addrs+0(FP), SI
	MOVQ  n+8(FP), BX
	MOVQ  size+16(FP), DX
	TESTQ BX, BX
	JLE   done

next:
	MOVQ (SI), AX
	MOVQ DX, CX

line:
	PREFETCHT0 (AX)
	ADDQ       $64, AX
	SUBQ       $64, CX
	JGT        line
	ADDQ       $8, SI
	DECQ       BX
	JNZ        next

done:
	RET
