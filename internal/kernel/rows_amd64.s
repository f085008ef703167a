//go:build !purego

#include "textflag.h"

// func copyRows(dst unsafe.Pointer, rows *[rowsAhead]uintptr, n int, size uintptr)
//
// Copies n rows of size bytes (a multiple of 32, at least 32) from the
// addresses rows[0], ..., rows[n-1] to consecutive places from dst, with
// AVX loads and stores of 32 bytes, 128 bytes per iteration while at least
// that many are left in the row.
TEXT ·copyRows(SB), NOSPLIT, $0-32
	MOVQ  dst+0(FP), DI
	MOVQ  rows+8(FP), SI
	MOVQ  n+16(FP), BX
	MOVQ  size+24(FP), DX
	TESTQ BX, BX
	JLE   done

row:
	MOVQ (SI), AX
	MOVQ DX, CX
	CMPQ CX, $128
	JB   loop32

loop128:
	VMOVDQU 0(AX), Y0
	VMOVDQU 32(AX), Y1
	VMOVDQU 64(AX), Y2
	VMOVDQU 96(AX), Y3
	VMOVDQU Y0, 0(DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)
	ADDQ    $128, AX
	ADDQ    $128, DI
	SUBQ    $128, CX
	CMPQ    CX, $128
	JAE     loop128
	TESTQ   CX, CX
	JZ      next

loop32:
	VMOVDQU (AX), Y0
	VMOVDQU Y0, (DI)
	ADDQ    $32, AX
	ADDQ    $32, DI
	SUBQ    $32, CX
	JNZ     loop32

next:
	ADDQ $8, SI
	DECQ BX
	JNZ  row
	VZEROUPPER

done:
	RET

// func streamRows(dst unsafe.Pointer, rows *[rowsAhead]uintptr, n int, size uintptr)
//
// copyRows with non-temporal stores (VMOVNTDQ); dst must be 32-byte aligned.
TEXT ·streamRows(SB), NOSPLIT, $0-32
	MOVQ  dst+0(FP), DI
	MOVQ  rows+8(FP), SI
	MOVQ  n+16(FP), BX
	MOVQ  size+24(FP), DX
	TESTQ BX, BX
	JLE   sdone

srow:
	MOVQ (SI), AX
	MOVQ DX, CX
	CMPQ CX, $128
	JB   sloop32

sloop128:
	VMOVDQU 0(AX), Y0
	VMOVDQU 32(AX), Y1
	VMOVDQU 64(AX), Y2
	VMOVDQU 96(AX), Y3
	VMOVNTDQ Y0, 0(DI)
	VMOVNTDQ Y1, 32(DI)
	VMOVNTDQ Y2, 64(DI)
	VMOVNTDQ Y3, 96(DI)
	ADDQ    $128, AX
	ADDQ    $128, DI
	SUBQ    $128, CX
	CMPQ    CX, $128
	JAE     sloop128
	TESTQ   CX, CX
	JZ      snext

sloop32:
	VMOVDQU  (AX), Y0
	VMOVNTDQ Y0, (DI)
	ADDQ     $32, AX
	ADDQ     $32, DI
	SUBQ     $32, CX
	JNZ      sloop32

snext:
	ADDQ $8, SI
	DECQ BX
	JNZ  srow
	VZEROUPPER

sdone:
	RET
