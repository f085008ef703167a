//go:build !purego

#include "textflag.h"

// func adamRow32(w, grad, m, v *float32, n int, c *AdamConsts)
//
// adamRow32Go on eight elements at a time: VMULPS and VADDPS or VSUBPS in
// adamRow32Go's order, no fused multiply-add; VSQRTPS and VDIVPS round
// correctly, as Go's float32 square root and division do.
TEXT ·adamRow32(SB), NOSPLIT, $0-48
	MOVQ         w+0(FP), DI
	MOVQ         grad+8(FP), SI
	MOVQ         m+16(FP), R8
	MOVQ         v+24(FP), R9
	MOVQ         n+32(FP), BX
	MOVQ         c+40(FP), AX
	TESTQ        BX, BX
	JLE          done
	VBROADCASTSS 0(AX), Y15  // β1
	VBROADCASTSS 4(AX), Y14  // 1-β1
	VBROADCASTSS 8(AX), Y13  // β2
	VBROADCASTSS 12(AX), Y12 // 1-β2
	VBROADCASTSS 16(AX), Y11 // eps
	VBROADCASTSS 20(AX), Y10 // step
	VBROADCASTSS 24(AX), Y9  // decay
	XORQ         CX, CX

loop:
	VMOVUPS (SI)(CX*4), Y0 // g
	VMULPS  (R8)(CX*4), Y15, Y1
	VMULPS  Y0, Y14, Y2
	VADDPS  Y2, Y1, Y1     // m = β1·m + (1-β1)·g
	VMULPS  (R9)(CX*4), Y13, Y3
	VMULPS  Y0, Y12, Y4
	VMULPS  Y0, Y4, Y4
	VADDPS  Y4, Y3, Y3     // v = β2·v + ((1-β2)·g)·g
	VMOVUPS Y1, (R8)(CX*4)
	VMOVUPS Y3, (R9)(CX*4)
	VSQRTPS Y3, Y3
	VADDPS  Y11, Y3, Y3    // sqrt(v) + eps
	VMULPS  Y1, Y10, Y1    // step·m
	VDIVPS  Y3, Y1, Y1
	VMULPS  (DI)(CX*4), Y9, Y2
	VSUBPS  Y1, Y2, Y2     // w·decay - step·m/(sqrt(v)+eps)
	VMOVUPS Y2, (DI)(CX*4)
	ADDQ    $8, CX
	CMPQ    CX, BX
	JLT     loop
	VZEROUPPER

done:
	RET

// func adamDense32(w, grad, m, v *float32, n int, c *adamDenseConsts32)
//
// adamDenseTask's float32 loop on eight elements at a time, its
// operations in its order: VMULPS, VADDPS, VSUBPS, VSQRTPS and VDIVPS,
// each rounded as Go rounds the same float32 operation, no fused
// multiply-add.
TEXT ·adamDense32(SB), NOSPLIT, $0-48
	MOVQ         w+0(FP), DI
	MOVQ         grad+8(FP), SI
	MOVQ         m+16(FP), R8
	MOVQ         v+24(FP), R9
	MOVQ         n+32(FP), BX
	MOVQ         c+40(FP), AX
	TESTQ        BX, BX
	JLE          densedone
	VBROADCASTSS 0(AX), Y15  // shrink
	VBROADCASTSS 4(AX), Y14  // wd
	VBROADCASTSS 8(AX), Y13  // b1
	VBROADCASTSS 12(AX), Y12 // 1-b1
	VBROADCASTSS 16(AX), Y11 // b2
	VBROADCASTSS 20(AX), Y10 // 1-b2
	VBROADCASTSS 24(AX), Y9  // sqrt(1-b2^t)
	VBROADCASTSS 28(AX), Y8  // eps
	VBROADCASTSS 32(AX), Y7  // lr/(1-b1^t)
	XORQ         CX, CX

denseloop:
	VMULPS  (DI)(CX*4), Y15, Y0 // x = w·shrink
	VMULPS  Y0, Y14, Y1
	VADDPS  (SI)(CX*4), Y1, Y1  // d = g + wd·x
	VMULPS  (R8)(CX*4), Y13, Y2
	VMULPS  Y1, Y12, Y3
	VADDPS  Y3, Y2, Y2          // m = b1·m + (1-b1)·d
	VMULPS  (R9)(CX*4), Y11, Y4
	VMULPS  Y1, Y1, Y5
	VMULPS  Y5, Y10, Y5
	VADDPS  Y5, Y4, Y4          // v = b2·v + (1-b2)·(d·d)
	VMOVUPS Y2, (R8)(CX*4)
	VMOVUPS Y4, (R9)(CX*4)
	VSQRTPS Y4, Y4
	VDIVPS  Y9, Y4, Y4
	VADDPS  Y8, Y4, Y4          // sqrt(v)/sqrt(1-b2^t) + eps
	VMULPS  Y2, Y7, Y2
	VDIVPS  Y4, Y2, Y2
	VSUBPS  Y2, Y0, Y0          // x - size·m/den
	VMOVUPS Y0, (DI)(CX*4)
	ADDQ    $8, CX
	CMPQ    CX, BX
	JLT     denseloop
	VZEROUPPER

densedone:
	RET
