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

// func streamScaled32(dst, src unsafe.Pointer, n uintptr, c float32)
//
// Sets the n float32s at the 16-byte aligned dst (n a multiple of 4, at
// least 4) to 0 + c*src[i] with non-temporal stores: a multiply, then an
// add to +0, as the loop d[i] += c*src[i] computes it on a cleared d.
TEXT ·streamScaled32(SB), NOSPLIT, $0-28
	MOVQ   dst+0(FP), DI
	MOVQ   src+8(FP), SI
	MOVQ   n+16(FP), CX
	MOVSS  c+24(FP), X0
	SHUFPS $0, X0, X0
	XORPS  X7, X7

loop32:
	MOVUPS  (SI), X1
	MULPS   X0, X1
	ADDPS   X7, X1
	MOVNTPS X1, (DI)
	ADDQ    $16, SI
	ADDQ    $16, DI
	SUBQ    $4, CX
	JNZ     loop32
	RET

// func streamScaled64(dst, src unsafe.Pointer, n uintptr, c float64)
//
// streamScaled32 for float64s; n is a multiple of 2, at least 2.
TEXT ·streamScaled64(SB), NOSPLIT, $0-32
	MOVQ   dst+0(FP), DI
	MOVQ   src+8(FP), SI
	MOVQ   n+16(FP), CX
	MOVSD  c+24(FP), X0
	SHUFPD $0, X0, X0
	XORPD  X7, X7

loop64d:
	MOVUPD  (SI), X1
	MULPD   X0, X1
	ADDPD   X7, X1
	MOVNTPD X1, (DI)
	ADDQ    $16, SI
	ADDQ    $16, DI
	SUBQ    $2, CX
	JNZ     loop64d
	RET
