//go:build !purego

#include "textflag.h"

// MOVEROWS(store) is the body of copyRows and streamRows, which differ
// only in the instruction that stores 32 bytes: for each row k, prefetch
// the size bytes at ahead[k] when there is one, then copy the row from
// rows[k] to dst, 128 bytes per iteration while that many are left, then
// 32 at a time.
#define MOVEROWS(store) \
	MOVQ  dst+0(FP), DI; \
	MOVQ  rows_base+8(FP), SI; \
	MOVQ  rows_len+16(FP), BX; \
	MOVQ  size+32(FP), DX; \
	MOVQ  ahead_base+40(FP), R8; \
	MOVQ  ahead_len+48(FP), R9; \
	TESTQ BX, BX; \
	JLE   done; \
	XORQ  R10, R10; \
row: \
	CMPQ       R10, R9; \
	JAE        own; \
	MOVQ       (R8)(R10*8), R11; \
	MOVQ       DX, R12; \
ahead: \
	PREFETCHT0 (R11); \
	ADDQ       $64, R11; \
	SUBQ       $64, R12; \
	JGT        ahead; \
own: \
	MOVQ (SI)(R10*8), AX; \
	MOVQ DX, CX; \
	CMPQ CX, $128; \
	JB   loop32; \
loop128: \
	VMOVDQU 0(AX), Y0; \
	VMOVDQU 32(AX), Y1; \
	VMOVDQU 64(AX), Y2; \
	VMOVDQU 96(AX), Y3; \
	store   Y0, 0(DI); \
	store   Y1, 32(DI); \
	store   Y2, 64(DI); \
	store   Y3, 96(DI); \
	ADDQ    $128, AX; \
	ADDQ    $128, DI; \
	SUBQ    $128, CX; \
	CMPQ    CX, $128; \
	JAE     loop128; \
	TESTQ   CX, CX; \
	JZ      next; \
loop32: \
	VMOVDQU (AX), Y0; \
	store   Y0, (DI); \
	ADDQ    $32, AX; \
	ADDQ    $32, DI; \
	SUBQ    $32, CX; \
	JNZ     loop32; \
next: \
	INCQ R10; \
	CMPQ R10, BX; \
	JB   row; \
	VZEROUPPER; \
done: \
	RET

// func copyRows(dst unsafe.Pointer, rows []uintptr, size uintptr, ahead []uintptr)
//
// Copies the rows of size bytes (a multiple of 32, at least 32) at the
// addresses rows[0], ..., rows[len(rows)-1] to consecutive places from dst,
// with AVX loads and stores of 32 bytes (see MOVEROWS).
TEXT ·copyRows(SB), NOSPLIT, $0-64
	MOVEROWS(VMOVDQU)

// func streamRows(dst unsafe.Pointer, rows []uintptr, size uintptr, ahead []uintptr)
//
// copyRows with non-temporal stores (VMOVNTDQ); dst must be 32-byte aligned.
TEXT ·streamRows(SB), NOSPLIT, $0-64
	MOVEROWS(VMOVNTDQ)

// AHEAD256 prefetches 256 bytes at offset R10 of ahead[CX] (base R15,
// length R14), if there is one, and then goes on at next.
#define AHEAD256(next) \
	CMPQ       CX, R14; \
	JAE        next; \
	MOVQ       (R15)(CX*8), R12; \
	ADDQ       R10, R12; \
	PREFETCHT0 0(R12); \
	PREFETCHT0 64(R12); \
	PREFETCHT0 128(R12); \
	PREFETCHT0 192(R12)

// OWN256 loads into AX the address of offset R10 of rows[CX] (base SI)
// and, while more blocks follow (R13 set), prefetches the row's next 256
// bytes; then it goes on at next.
#define OWN256(next) \
	MOVQ       (SI)(CX*8), AX; \
	ADDQ       R10, AX; \
	TESTQ      R13, R13; \
	JZ         next; \
	PREFETCHT0 256(AX); \
	PREFETCHT0 320(AX); \
	PREFETCHT0 384(AX); \
	PREFETCHT0 448(AX)

// AHEAD32 prefetches the line at offset R10 of ahead[CX], if there is one,
// and then goes on at next.
#define AHEAD32(next) \
	CMPQ       CX, R14; \
	JAE        next; \
	MOVQ       (R15)(CX*8), R12; \
	PREFETCHT0 (R12)(R10*1)

// func sumRows(dst unsafe.Pointer, rows []uintptr, coef []float32, size uintptr, ahead []uintptr, scale float32, acc bool)
//
// For each block of 256 bytes of dst (then of 32 bytes, for the rest): load
// it into Y0-Y7 (or zero them, when acc is false: dst is then only
// written), add that block of every row (times its coef, broadcast
// into Y8, when coef is not empty), multiply by scale (in Y13), store it
// back. Products are rounded before they are added (VMULPS then VADDPS),
// as in sumRowsGo. While adding row k, prefetch the same block of ahead[k],
// when there is one.
TEXT ·sumRows(SB), NOSPLIT, $0-93
	MOVQ  dst+0(FP), DI
	MOVQ  rows_base+8(FP), SI
	MOVQ  rows_len+16(FP), BX
	MOVQ  coef_base+32(FP), R8
	MOVQ  coef_len+40(FP), R9
	MOVQ  size+56(FP), DX
	MOVQ  ahead_base+64(FP), R15
	MOVQ  ahead_len+72(FP), R14
	TESTQ BX, BX
	JLE   sdone2
	VBROADCASTSS scale+88(FP), Y13
	XORQ  R10, R10 // offset of the block in dst and in each row

block256:
	CMPQ    DX, $256
	JB      block32
	LEAQ    (DI)(R10*1), R11
	CMPB    acc+92(FP), $0
	JEQ     zero256
	VMOVUPS 0(R11), Y0
	VMOVUPS 32(R11), Y1
	VMOVUPS 64(R11), Y2
	VMOVUPS 96(R11), Y3
	VMOVUPS 128(R11), Y4
	VMOVUPS 160(R11), Y5
	VMOVUPS 192(R11), Y6
	VMOVUPS 224(R11), Y7
	JMP     start256

zero256:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

start256:
	XORQ CX, CX

	// R13 is set while more blocks follow: then, while adding this block of
	// each row, prefetch the row's next block, which the next pass then
	// finds in the cache.
	XORQ    R13, R13
	CMPQ    DX, $512
	SETCC   R13
	TESTQ   R9, R9
	JNZ     scaled256

plain256:
	AHEAD256(plainown256)

plainown256:
	OWN256(plainadd256)

plainadd256:
	VADDPS 0(AX), Y0, Y0
	VADDPS 32(AX), Y1, Y1
	VADDPS 64(AX), Y2, Y2
	VADDPS 96(AX), Y3, Y3
	VADDPS 128(AX), Y4, Y4
	VADDPS 160(AX), Y5, Y5
	VADDPS 192(AX), Y6, Y6
	VADDPS 224(AX), Y7, Y7
	INCQ   CX
	CMPQ   CX, BX
	JB     plain256
	JMP    store256

scaled256:
	AHEAD256(scaledown256)

scaledown256:
	OWN256(scaledadd256)

scaledadd256:
	VBROADCASTSS (R8)(CX*4), Y8
	VMULPS       0(AX), Y8, Y9
	VADDPS       Y9, Y0, Y0
	VMULPS       32(AX), Y8, Y10
	VADDPS       Y10, Y1, Y1
	VMULPS       64(AX), Y8, Y11
	VADDPS       Y11, Y2, Y2
	VMULPS       96(AX), Y8, Y12
	VADDPS       Y12, Y3, Y3
	VMULPS       128(AX), Y8, Y9
	VADDPS       Y9, Y4, Y4
	VMULPS       160(AX), Y8, Y10
	VADDPS       Y10, Y5, Y5
	VMULPS       192(AX), Y8, Y11
	VADDPS       Y11, Y6, Y6
	VMULPS       224(AX), Y8, Y12
	VADDPS       Y12, Y7, Y7
	INCQ         CX
	CMPQ         CX, BX
	JB           scaled256

store256:
	VMULPS  Y13, Y0, Y0
	VMULPS  Y13, Y1, Y1
	VMULPS  Y13, Y2, Y2
	VMULPS  Y13, Y3, Y3
	VMULPS  Y13, Y4, Y4
	VMULPS  Y13, Y5, Y5
	VMULPS  Y13, Y6, Y6
	VMULPS  Y13, Y7, Y7
	VMOVUPS Y0, 0(R11)
	VMOVUPS Y1, 32(R11)
	VMOVUPS Y2, 64(R11)
	VMOVUPS Y3, 96(R11)
	VMOVUPS Y4, 128(R11)
	VMOVUPS Y5, 160(R11)
	VMOVUPS Y6, 192(R11)
	VMOVUPS Y7, 224(R11)
	ADDQ    $256, R10
	SUBQ    $256, DX
	JMP     block256

block32:
	TESTQ   DX, DX
	JZ      sumend
	LEAQ    (DI)(R10*1), R11
	VXORPS  Y0, Y0, Y0
	CMPB    acc+92(FP), $0
	JEQ     start32
	VMOVUPS (R11), Y0

start32:
	XORQ  CX, CX
	TESTQ   R9, R9
	JNZ     scaled32

plain32:
	AHEAD32(plainown32)

plainown32:
	MOVQ   (SI)(CX*8), AX
	VADDPS (AX)(R10*1), Y0, Y0
	INCQ   CX
	CMPQ   CX, BX
	JB     plain32
	JMP    store32

scaled32:
	AHEAD32(scaledown32)

scaledown32:
	MOVQ         (SI)(CX*8), AX
	VBROADCASTSS (R8)(CX*4), Y8
	VMULPS       (AX)(R10*1), Y8, Y9
	VADDPS       Y9, Y0, Y0
	INCQ         CX
	CMPQ         CX, BX
	JB           scaled32

store32:
	VMULPS  Y13, Y0, Y0
	VMOVUPS Y0, (R11)
	ADDQ    $32, R10
	SUBQ    $32, DX
	JMP     block32

sumend:
	VZEROUPPER

sdone2:
	RET
