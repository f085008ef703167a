package kernel

// inRange64Go returns how many of the n indices from p, in whole blocks of
// 16, come before the first block holding one outside [-s, s-1]: n, a
// multiple of 16, if no block does. s must be in [1, 2^62]. It is
//
//	for b := 0; b < n; b += 16 { if firstBadFrom(idx[b:b+16], s, 0) >= 0 { return b } }; return n
//
// and the reference for inRange64's assembly.
func inRange64Go(p *int64, n int, s int) int { return inRangeGo(sliceAt(p, n), s) }

// inRange32Go is inRange64Go for int32 indices.
func inRange32Go(p *int32, n int, s int) int { return inRangeGo(sliceAt(p, n), s) }

func inRangeGo[I int32 | int64](idx []I, s int) int {
	for b := 0; b+16 <= len(idx); b += 16 {
		if firstBadFrom(idx[b:b+16], s, 0) >= 0 {
			return b
		}
	}
	return len(idx) &^ 15
}
