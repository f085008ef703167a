//go:build !purego

#include "textflag.h"

// func exp32(dst, src []float32)
//
// exp32Go on eight elements at a time: clamp x below at expMin (VMAXPS
// returns x itself when x is NaN), n = round(x·log2(e)), r = x - n·ln2Hi -
// n·ln2Lo, Taylor polynomial of exp(r) by Horner's rule (VMULPS then
// VADDPS, no fused multiply-add, as in exp32Go), times 2^n built in the
// exponent bits, and 0 where x < expMin.
TEXT ·exp32(SB), NOSPLIT, $0-48
	MOVQ         dst_base+0(FP), DI
	MOVQ         src_base+24(FP), SI
	MOVQ         src_len+32(FP), BX
	TESTQ        BX, BX
	JLE          done
	VBROADCASTSS ·expConst+0(SB), Y15  // expMin
	VBROADCASTSS ·expConst+4(SB), Y14  // log2(e)
	VBROADCASTSS ·expConst+8(SB), Y13  // ln2Hi
	VBROADCASTSS ·expConst+12(SB), Y12 // ln2Lo
	VBROADCASTSS ·expConst+16(SB), Y11 // 1/7!
	VBROADCASTSS ·expConst+20(SB), Y10 // 1/6!
	VBROADCASTSS ·expConst+24(SB), Y9  // 1/5!
	VBROADCASTSS ·expConst+28(SB), Y8  // 1/4!
	VBROADCASTSS ·expConst+32(SB), Y7  // 1/3!
	VBROADCASTSS ·expConst+36(SB), Y6  // 1/2!
	VBROADCASTSS ·expConst+40(SB), Y5  // 1
	VPBROADCASTD ·expBias(SB), Y4
	XORQ         CX, CX

loop:
	VMOVUPS   (SI)(CX*4), Y0
	VMAXPS    Y0, Y15, Y1 // c = max(expMin, x)
	VMULPS    Y14, Y1, Y2
	VROUNDPS  $0, Y2, Y2  // n, to nearest even
	VMULPS    Y13, Y2, Y3
	VSUBPS    Y3, Y1, Y1
	VMULPS    Y12, Y2, Y3
	VSUBPS    Y3, Y1, Y1  // r
	VMULPS    Y11, Y1, Y3
	VADDPS    Y10, Y3, Y3
	VMULPS    Y1, Y3, Y3
	VADDPS    Y9, Y3, Y3
	VMULPS    Y1, Y3, Y3
	VADDPS    Y8, Y3, Y3
	VMULPS    Y1, Y3, Y3
	VADDPS    Y7, Y3, Y3
	VMULPS    Y1, Y3, Y3
	VADDPS    Y6, Y3, Y3
	VMULPS    Y1, Y3, Y3
	VADDPS    Y5, Y3, Y3
	VMULPS    Y1, Y3, Y3
	VADDPS    Y5, Y3, Y3  // exp(r)
	VCVTPS2DQ Y2, Y2
	VPADDD    Y4, Y2, Y2
	VPSLLD    $23, Y2, Y2 // 2^n
	VMULPS    Y2, Y3, Y3
	VCMPPS    $5, Y15, Y0, Y2 // not (x < expMin): true for NaN
	VANDPS    Y2, Y3, Y3
	VMOVUPS   Y3, (DI)(CX*4)
	ADDQ      $8, CX
	CMPQ      CX, BX
	JB        loop
	VZEROUPPER

done:
	RET
