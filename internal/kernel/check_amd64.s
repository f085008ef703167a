//go:build !purego

#include "textflag.h"

// The two functions below find how many leading indices, in whole blocks
// of 16, lie in [-s, s-1], for 1 <= s <= 2^62. Both use the test of
// firstBad: v is in range exactly when v+s, read as unsigned, is below 2s.
// AVX2 compares only signed integers, so both sides are offset by 2^63:
// v is out of range exactly when v + (s + 2^63) > (2s-1) + 2^63, signed.
// Each block of 16 ORs its four comparisons and tests them once.

// RANGE_SETUP loads p into SI, n into CX and, from s, s + 2^63 into every
// lane of Y0 and (2s-1) + 2^63 into every lane of Y1; it zeroes AX, the
// count of elements checked.
#define RANGE_SETUP \
	MOVQ         p+0(FP), SI; \
	MOVQ         n+8(FP), CX; \
	MOVQ         s+16(FP), DX; \
	MOVQ         $-9223372036854775808, R8; \
	MOVQ         DX, AX; \
	ADDQ         R8, AX; \
	LEAQ         -1(DX)(DX*1), BX; \
	ADDQ         R8, BX; \
	MOVQ         AX, X0; \
	VPBROADCASTQ X0, Y0; \
	MOVQ         BX, X1; \
	VPBROADCASTQ X1, Y1; \
	XORQ         AX, AX

// RANGE_TEST compares the four blocks of offset indices in Y2-Y5 with Y1
// and jumps to done if any lane is out of range.
#define RANGE_TEST \
	VPCMPGTQ Y1, Y2, Y2; \
	VPCMPGTQ Y1, Y3, Y3; \
	VPCMPGTQ Y1, Y4, Y4; \
	VPCMPGTQ Y1, Y5, Y5; \
	VPOR     Y2, Y3, Y3; \
	VPOR     Y4, Y5, Y5; \
	VPOR     Y3, Y5, Y5; \
	VPTEST   Y5, Y5; \
	JNZ      done

// func inRange64(p *int64, n int, s int) int
//
// Returns the number of elements, a multiple of 16, in the blocks of 16
// from p that come before the first block holding an index out of range;
// n (a multiple of 16) if there is none.
TEXT ·inRange64(SB), NOSPLIT, $0-32
	RANGE_SETUP

loop:
	CMPQ   AX, CX
	JAE    done
	VPADDQ 0(SI)(AX*8), Y0, Y2
	VPADDQ 32(SI)(AX*8), Y0, Y3
	VPADDQ 64(SI)(AX*8), Y0, Y4
	VPADDQ 96(SI)(AX*8), Y0, Y5
	RANGE_TEST
	ADDQ   $16, AX
	JMP    loop

done:
	VZEROUPPER
	MOVQ AX, ret+24(FP)
	RET

// func inRange32(p *int32, n int, s int) int
//
// inRange64 for int32 indices, each widened to 64 bits as it is loaded.
TEXT ·inRange32(SB), NOSPLIT, $0-32
	RANGE_SETUP

loop:
	CMPQ      AX, CX
	JAE       done
	VPMOVSXDQ 0(SI)(AX*4), Y2
	VPMOVSXDQ 16(SI)(AX*4), Y3
	VPMOVSXDQ 32(SI)(AX*4), Y4
	VPMOVSXDQ 48(SI)(AX*4), Y5
	VPADDQ    Y0, Y2, Y2
	VPADDQ    Y0, Y3, Y3
	VPADDQ    Y0, Y4, Y4
	VPADDQ    Y0, Y5, Y5
	RANGE_TEST
	ADDQ      $16, AX
	JMP       loop

done:
	VZEROUPPER
	MOVQ AX, ret+24(FP)
	RET
