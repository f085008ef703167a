//go:build !purego

#include "textflag.h"

// func streamCopy(dst, src unsafe.Pointer, n uintptr)
//
// Copies n bytes, a multiple of 16, from src to the 16-byte aligned dst
// with SSE2 non-temporal stores: 64 bytes per iteration, then 16 at a time.
TEXT ·streamCopy(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CMPQ CX, $64
	JB   tail

loop64:
	MOVOU  0(SI), X0
	MOVOU  16(SI), X1
	MOVOU  32(SI), X2
	MOVOU  48(SI), X3
	MOVNTO X0, 0(DI)
	MOVNTO X1, 16(DI)
	MOVNTO X2, 32(DI)
	MOVNTO X3, 48(DI)
	ADDQ   $64, SI
	ADDQ   $64, DI
	SUBQ   $64, CX
	CMPQ   CX, $64
	JAE    loop64

tail:
	TESTQ CX, CX
	JZ    done

loop16:
	MOVOU  (SI), X0
	MOVNTO X0, (DI)
	ADDQ   $16, SI
	ADDQ   $16, DI
	SUBQ   $16, CX
	JNZ    loop16

done:
	RET

// func storeFence()
TEXT ·storeFence(SB), NOSPLIT, $0-0
	SFENCE
	RET

// func streamClear(dst unsafe.Pointer, n uintptr)
//
// Sets n bytes, a multiple of 16, at the 16-byte aligned dst to zero with
// SSE2 non-temporal stores: 64 bytes per iteration, then 16 at a time.
TEXT ·streamClear(SB), NOSPLIT, $0-16
	MOVQ dst+0(FP), DI
	MOVQ n+8(FP), CX
	PXOR X0, X0
	CMPQ CX, $64
	JB   ctail

cloop64:
	MOVNTO X0, 0(DI)
	MOVNTO X0, 16(DI)
	MOVNTO X0, 32(DI)
	MOVNTO X0, 48(DI)
	ADDQ   $64, DI
	SUBQ   $64, CX
	CMPQ   CX, $64
	JAE    cloop64

ctail:
	TESTQ CX, CX
	JZ    cdone

cloop16:
	MOVNTO X0, (DI)
	ADDQ   $16, DI
	SUBQ   $16, CX
	JNZ    cloop16

cdone:
	RET
