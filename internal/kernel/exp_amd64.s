//go:build !purego

#include "textflag.h"

// EXP_CONSTS loads exp32's constants: Y15 expMin, Y14 log2(e), Y13 ln2Hi,
// Y12 ln2Lo, Y11 to Y6 1/7! to 1/2!, Y5 1, Y4 the exponent bias.
#define EXP_CONSTS \
	VBROADCASTSS ·expConst+0(SB), Y15; \
	VBROADCASTSS ·expConst+4(SB), Y14; \
	VBROADCASTSS ·expConst+8(SB), Y13; \
	VBROADCASTSS ·expConst+12(SB), Y12; \
	VBROADCASTSS ·expConst+16(SB), Y11; \
	VBROADCASTSS ·expConst+20(SB), Y10; \
	VBROADCASTSS ·expConst+24(SB), Y9; \
	VBROADCASTSS ·expConst+28(SB), Y8; \
	VBROADCASTSS ·expConst+32(SB), Y7; \
	VBROADCASTSS ·expConst+36(SB), Y6; \
	VBROADCASTSS ·expConst+40(SB), Y5; \
	VPBROADCASTD ·expBias(SB), Y4

// EXP_STEPS sets Y3 to exp32Go of the eight values of Y0 (see exp32),
// with Y1 and Y2 for scratch.
#define EXP_STEPS \
	VMAXPS    Y0, Y15, Y1; \
	VMULPS    Y14, Y1, Y2; \
	VROUNDPS  $0, Y2, Y2; \
	VMULPS    Y13, Y2, Y3; \
	VSUBPS    Y3, Y1, Y1; \
	VFNMADD231PS Y12, Y2, Y1; \
	VMOVAPS   Y11, Y3; \
	VFMADD213PS Y10, Y1, Y3; \
	VFMADD213PS Y9, Y1, Y3; \
	VFMADD213PS Y8, Y1, Y3; \
	VFMADD213PS Y7, Y1, Y3; \
	VFMADD213PS Y6, Y1, Y3; \
	VFMADD213PS Y5, Y1, Y3; \
	VFMADD213PS Y5, Y1, Y3; \
	VCVTPS2DQ Y2, Y2; \
	VPADDD    Y4, Y2, Y2; \
	VPSLLD    $23, Y2, Y2; \
	VMULPS    Y2, Y3, Y3; \
	VCMPPS    $5, Y15, Y0, Y2; \
	VANDPS    Y2, Y3, Y3


// func exp32(dst, src []float32)
//
// exp32Go on eight elements at a time: clamp x below at expMin (VMAXPS
// returns x itself when x is NaN), n = round(x·log2(e)), r = x - n·ln2Hi -
// n·ln2Lo (the second step a VFNMADD), Taylor polynomial of exp(r) by
// Horner's rule in VFMADDs (each rounded once, as FMA32 in exp32Go), times
// 2^n built in the exponent bits, and 0 where x < expMin.
TEXT ·exp32(SB), NOSPLIT, $0-48
	MOVQ         dst_base+0(FP), DI
	MOVQ         src_base+24(FP), SI
	MOVQ         src_len+32(FP), BX
	TESTQ        BX, BX
	JLE          done
	EXP_CONSTS
	XORQ         CX, CX

loop:
	VMOVUPS   (SI)(CX*4), Y0
	EXP_STEPS
	VMOVUPS   Y3, (DI)(CX*4)
	ADDQ      $8, CX
	CMPQ      CX, BX
	JB        loop
	VZEROUPPER

done:
	RET

// func rowMaxShift32(e, x, m *float32, rows, c int)
//
// rowMaxShift32Go a row at a time: the maximum of eight lanes over the
// row's first c&^7 elements, then of the lanes, then of the rest one at a
// time; VMAXPS and VMAXSS keep their first Go operand (the running
// maximum) when the other is NaN or equal, as rowMaxShift32Go's v > m
// does. Then e = x - m, eight elements at a time and the rest one by one.
TEXT ·rowMaxShift32(SB), NOSPLIT, $0-40
	MOVQ         e+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         m+16(FP), R8
	MOVQ         rows+24(FP), R9
	MOVQ         c+32(FP), BX
	MOVQ         BX, R10
	ANDQ         $-8, R10      // c&^7
	MOVL         $0xff800000, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15      // -Inf

row:
	VMOVAPS Y15, Y0
	XORQ    CX, CX
	CMPQ    CX, R10
	JGE     lanes

max8:
	VMOVUPS (SI)(CX*4), Y1
	VMAXPS  Y0, Y1, Y0
	ADDQ    $8, CX
	CMPQ    CX, R10
	JL      max8

lanes:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X0, X1, X0
	VPERMILPS    $0x4e, X0, X1
	VMAXPS       X0, X1, X0
	VPERMILPS    $0xb1, X0, X1
	VMAXPS       X0, X1, X0
	CMPQ         CX, BX
	JGE          shift

max1:
	VMOVSS (SI)(CX*4), X1
	VMAXSS X0, X1, X0
	INCQ   CX
	CMPQ   CX, BX
	JL     max1

shift:
	VMOVSS       X0, (R8)
	VBROADCASTSS X0, Y2
	XORQ         CX, CX
	CMPQ         CX, R10
	JGE          sub1check

sub8:
	VMOVUPS (SI)(CX*4), Y1
	VSUBPS  Y2, Y1, Y1
	VMOVUPS Y1, (DI)(CX*4)
	ADDQ    $8, CX
	CMPQ    CX, R10
	JL      sub8

sub1check:
	CMPQ CX, BX
	JGE  next

sub1:
	VMOVSS (SI)(CX*4), X1
	VSUBSS X2, X1, X1
	VMOVSS X1, (DI)(CX*4)
	INCQ   CX
	CMPQ   CX, BX
	JL     sub1

next:
	LEAQ (SI)(BX*4), SI
	LEAQ (DI)(BX*4), DI
	ADDQ $4, R8
	DECQ R9
	JNZ  row
	VZEROUPPER
	RET

// func rowSums32(s *float64, e *float32, rows, c int)
//
// rowSums32Go a row at a time: four elements widened to float64 and added
// to four lanes, the lanes added as (0 + 2) + (1 + 3), then the rest one
// at a time.
TEXT ·rowSums32(SB), NOSPLIT, $0-32
	MOVQ s+0(FP), DI
	MOVQ e+8(FP), SI
	MOVQ rows+16(FP), R9
	MOVQ c+24(FP), BX
	MOVQ BX, R10
	ANDQ $-4, R10     // c&^3

srow:
	VXORPD Y0, Y0, Y0
	XORQ   CX, CX
	CMPQ   CX, R10
	JGE    sreduce

sum4:
	VCVTPS2PD (SI)(CX*4), Y1
	VADDPD    Y1, Y0, Y0
	ADDQ      $4, CX
	CMPQ      CX, R10
	JL        sum4

sreduce:
	VEXTRACTF128 $1, Y0, X1
	VADDPD       X1, X0, X0    // (0 + 2, 1 + 3)
	VPERMILPD    $1, X0, X1
	VADDSD       X1, X0, X0
	CMPQ         CX, BX
	JGE          sstore

sum1:
	VCVTSS2SD (SI)(CX*4), X1, X1
	VADDSD    X1, X0, X0
	INCQ      CX
	CMPQ      CX, BX
	JL        sum1

sstore:
	VMOVSD X0, (DI)
	LEAQ   (SI)(BX*4), SI
	ADDQ   $8, DI
	DECQ   R9
	JNZ    srow
	VZEROUPPER
	RET

// func log1p32(dst, src []float32)
//
// log1p32Go on eight elements at a time: t = e/(2+e) (VDIVPS rounds
// correctly, as Go's division does), w = t·t, the series in w by Horner's
// rule (VMULPS then VADDPS, no fused multiply-add), times t+t.
TEXT ·log1p32(SB), NOSPLIT, $0-48
	MOVQ         dst_base+0(FP), DI
	MOVQ         src_base+24(FP), SI
	MOVQ         src_len+32(FP), BX
	TESTQ        BX, BX
	JLE          ldone
	VBROADCASTSS ·log1pCoef+0(SB), Y15  // 2
	VBROADCASTSS ·log1pCoef+4(SB), Y14  // 1/13
	VBROADCASTSS ·log1pCoef+8(SB), Y13  // 1/11
	VBROADCASTSS ·log1pCoef+12(SB), Y12 // 1/9
	VBROADCASTSS ·log1pCoef+16(SB), Y11 // 1/7
	VBROADCASTSS ·log1pCoef+20(SB), Y10 // 1/5
	VBROADCASTSS ·log1pCoef+24(SB), Y9  // 1/3
	VBROADCASTSS ·log1pCoef+28(SB), Y8  // 1
	XORQ         CX, CX

lloop:
	VMOVUPS (SI)(CX*4), Y0
	VADDPS  Y15, Y0, Y1 // 2 + e
	VDIVPS  Y1, Y0, Y1  // t
	VMULPS  Y1, Y1, Y2  // w
	VMULPS  Y2, Y14, Y3
	VADDPS  Y13, Y3, Y3
	VMULPS  Y2, Y3, Y3
	VADDPS  Y12, Y3, Y3
	VMULPS  Y2, Y3, Y3
	VADDPS  Y11, Y3, Y3
	VMULPS  Y2, Y3, Y3
	VADDPS  Y10, Y3, Y3
	VMULPS  Y2, Y3, Y3
	VADDPS  Y9, Y3, Y3
	VMULPS  Y2, Y3, Y3
	VADDPS  Y8, Y3, Y3  // the series
	VADDPS  Y1, Y1, Y1  // t + t
	VMULPS  Y3, Y1, Y1
	VMOVUPS Y1, (DI)(CX*4)
	ADDQ    $8, CX
	CMPQ    CX, BX
	JB      lloop
	VZEROUPPER

ldone:
	RET

// func expNegAbs32(dst, src []float32)
//
// exp32 of -|x|: the sign bit set (VORPS) before exp32's steps.
TEXT ·expNegAbs32(SB), NOSPLIT, $0-48
	MOVQ         dst_base+0(FP), DI
	MOVQ         src_base+24(FP), SI
	MOVQ         src_len+32(FP), BX
	TESTQ        BX, BX
	JLE          ndone
	EXP_CONSTS
	XORQ         CX, CX

nloop:
	VMOVUPS   (SI)(CX*4), Y0
	VORPS     signBits<>(SB), Y0, Y0 // -|x|
	EXP_STEPS
	VMOVUPS   Y3, (DI)(CX*4)
	ADDQ      $8, CX
	CMPQ      CX, BX
	JB        nloop
	VZEROUPPER

ndone:
	RET

DATA signBits<>+0(SB)/8, $0x8000000080000000
DATA signBits<>+8(SB)/8, $0x8000000080000000
DATA signBits<>+16(SB)/8, $0x8000000080000000
DATA signBits<>+24(SB)/8, $0x8000000080000000
GLOBL signBits<>(SB), RODATA|NOPTR, $32

// func sigmoidGrad32(dst, x, y, e []float32, scale float32)
//
// sigmoidGrad32Go on eight elements at a time: num = e where x's sign
// bit is set, else 1 (VBLENDVPS), then scale·(num/(1+e) - y), each
// operation rounded, as in sigmoidGrad32Go.
TEXT ·sigmoidGrad32(SB), NOSPLIT, $0-100
	MOVQ         dst_base+0(FP), DI
	MOVQ         x_base+24(FP), SI
	MOVQ         x_len+32(FP), BX
	MOVQ         y_base+48(FP), R8
	MOVQ         e_base+72(FP), R9
	TESTQ        BX, BX
	JLE          gdone
	VBROADCASTSS scale+96(FP), Y15
	VBROADCASTSS ·expConst+40(SB), Y14 // 1
	XORQ         CX, CX

gloop:
	VMOVUPS   (SI)(CX*4), Y0 // x
	VMOVUPS   (R9)(CX*4), Y1 // e
	VBLENDVPS Y0, Y1, Y14, Y2 // num = sign(x) ? e : 1
	VADDPS    Y14, Y1, Y3    // 1 + e
	VDIVPS    Y3, Y2, Y2     // num/(1+e)
	VMOVUPS   (R8)(CX*4), Y4 // y
	VSUBPS    Y4, Y2, Y2
	VMULPS    Y2, Y15, Y2
	VMOVUPS   Y2, (DI)(CX*4)
	ADDQ      $8, CX
	CMPQ      CX, BX
	JB        gloop
	VZEROUPPER

gdone:
	RET

// func subRows32(out, x *float32, l *float64, rows, c int)
//
// subRows32Go a row at a time: four elements widened to float64, l[r]
// subtracted, narrowed to float32; then the rest one at a time.
TEXT ·subRows32(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ l+16(FP), R8
	MOVQ rows+24(FP), R9
	MOVQ c+32(FP), BX
	MOVQ BX, R10
	ANDQ $-4, R10    // c&^3

urow:
	VBROADCASTSD (R8), Y0
	XORQ         CX, CX
	CMPQ         CX, R10
	JGE          urest

usub4:
	VCVTPS2PD (SI)(CX*4), Y1
	VSUBPD    Y0, Y1, Y1
	VCVTPD2PSY Y1, X1
	VMOVUPS   X1, (DI)(CX*4)
	ADDQ      $4, CX
	CMPQ      CX, R10
	JL        usub4

urest:
	CMPQ CX, BX
	JGE  unext

usub1:
	VCVTSS2SD (SI)(CX*4), X1, X1
	VSUBSD    X0, X1, X1
	VCVTSD2SS X1, X1, X1
	VMOVSS    X1, (DI)(CX*4)
	INCQ      CX
	CMPQ      CX, BX
	JL        usub1

unext:
	LEAQ (SI)(BX*4), SI
	LEAQ (DI)(BX*4), DI
	ADDQ $8, R8
	DECQ R9
	JNZ  urow
	VZEROUPPER
	RET

// func scaleSubRows32(out, up, e *float32, k *float64, rows, c int)
//
// scaleSubRows32Go a row at a time: four elements of g and of e widened
// to float64, e times k[r] (VMULPD, rounded) subtracted from g (VSUBPD),
// narrowed to float32; then the rest one at a time.
TEXT ·scaleSubRows32(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ up+8(FP), SI
	MOVQ e+16(FP), R11
	MOVQ k+24(FP), R8
	MOVQ rows+32(FP), R9
	MOVQ c+40(FP), BX
	MOVQ BX, R10
	ANDQ $-4, R10    // c&^3

krow:
	VBROADCASTSD (R8), Y0
	XORQ         CX, CX
	CMPQ         CX, R10
	JGE          krest

ksub4:
	VCVTPS2PD (R11)(CX*4), Y2
	VMULPD    Y0, Y2, Y2
	VCVTPS2PD (SI)(CX*4), Y1
	VSUBPD    Y2, Y1, Y1
	VCVTPD2PSY Y1, X1
	VMOVUPS   X1, (DI)(CX*4)
	ADDQ      $4, CX
	CMPQ      CX, R10
	JL        ksub4

krest:
	CMPQ CX, BX
	JGE  knext

ksub1:
	VCVTSS2SD (R11)(CX*4), X2, X2
	VMULSD    X0, X2, X2
	VCVTSS2SD (SI)(CX*4), X1, X1
	VSUBSD    X2, X1, X1
	VCVTSD2SS X1, X1, X1
	VMOVSS    X1, (DI)(CX*4)
	INCQ      CX
	CMPQ      CX, BX
	JL        ksub1

knext:
	LEAQ (SI)(BX*4), SI
	LEAQ (R11)(BX*4), R11
	LEAQ (DI)(BX*4), DI
	ADDQ $8, R8
	DECQ R9
	JNZ  krow
	VZEROUPPER
	RET

// func scaleRows32(out, e, k *float32, rows, c int)
//
// scaleRows32Go a row at a time: eight elements times k[r], then the rest
// one at a time.
TEXT ·scaleRows32(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ e+8(FP), SI
	MOVQ k+16(FP), R8
	MOVQ rows+24(FP), R9
	MOVQ c+32(FP), BX
	MOVQ BX, R10
	ANDQ $-8, R10    // c&^7

mrow:
	VBROADCASTSS (R8), Y0
	XORQ         CX, CX
	CMPQ         CX, R10
	JGE          mrest

mmul8:
	VMULPS  (SI)(CX*4), Y0, Y1
	VMOVUPS Y1, (DI)(CX*4)
	ADDQ    $8, CX
	CMPQ    CX, R10
	JL      mmul8

mrest:
	CMPQ CX, BX
	JGE  mnext

mmul1:
	VMULSS (SI)(CX*4), X0, X1
	VMOVSS X1, (DI)(CX*4)
	INCQ   CX
	CMPQ   CX, BX
	JL     mmul1

mnext:
	LEAQ (SI)(BX*4), SI
	LEAQ (DI)(BX*4), DI
	ADDQ $4, R8
	DECQ R9
	JNZ  mrow
	VZEROUPPER
	RET
