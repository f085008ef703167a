package kernel

// Row addresses. copyRows, streamRows, sumRows and prefetchLines take rows
// as uintptr addresses, which the collector does not see as pointers. That
// is safe while three things hold:
//
//   - the caller keeps the memory alive for the call: it holds the slice
//     the addresses were taken from;
//   - the memory does not move: Go's collector does not move heap objects
//     (gorgonia.org/tensor relies on the same), and a mapped file
//     (nn.OpenEmbedding) lies outside Go's heap;
//   - the memory is not on a goroutine's stack, which is copied elsewhere
//     when it grows: every slice whose rows are taken as addresses is
//     passed to heapOnly first, so the compiler never puts it there.

// heapOnly makes the compiler keep s's memory off goroutine stacks: s
// escapes to a package variable as far as escape analysis can tell, so an
// array that a caller would have kept on its stack is put on the heap. It
// costs one load and branch at run time.
func heapOnly[T any](s []T) {
	if escapeNever {
		escapeSink = ptr(s)
	}
}

// escapeNever is false; the compiler cannot know it, so the store in
// heapOnly stays.
var (
	escapeNever bool
	escapeSink  *byte
)

// copyRowsGo copies the rows of size bytes at the addresses rows[0], ...,
// rows[len(rows)-1] to consecutive places from dst:
//
//	for i := range rows { copy(dst[i*size:(i+1)*size], rows[i][:size]) }
//
// It is the reference for copyRows and streamRows. ahead lists rows the
// caller moves next, for the assembly to prefetch; copyRowsGo does not use
// it. The caller keeps the memory rows point into alive.
func copyRowsGo(dst *byte, rows []uintptr, size uintptr, ahead []uintptr) {
	for i := range rows {
		// rows[i] holds an address as an integer; read it as a pointer.
		copy(valuesAt[byte](offset(dst, uintptr(i)*size), size), valuesAt[byte](rowAt(rows, i), size))
	}
}

// sumRowsGo adds to the size bytes of float32s at dst the rows at the
// addresses rows[0], ..., rows[len(rows)-1], each scaled by coef[k], or
// unscaled if coef is empty (then its length must be len(rows)), and
// multiplies the sum by scale:
//
//	for k := range rows { for c := range d { d[c] += float32(coef[k] * rows[k][c]) } }; for c := range d { d[c] *= scale }
//
// Each element sums its terms in row order, the product rounded before the
// addition. Without acc, the sum starts from zero instead of dst's values
// (dst is only written). With no rows, dst is left as it is. It is the
// reference for
// sumRows. ahead lists rows the caller adds next, for sumRows to prefetch;
// sumRowsGo does not use it. The caller keeps the memory rows point into
// alive.
func sumRowsGo(dst *byte, rows []uintptr, coef []float32, size uintptr, ahead []uintptr, scale float32, acc bool) {
	if len(rows) == 0 {
		return
	}
	d := valuesAt[float32](dst, size/4)
	if !acc {
		clear(d)
	}
	for k := range rows {
		// rows[k] holds an address as an integer; read it as a pointer.
		row := valuesAt[float32](rowAt(rows, k), uintptr(len(d)))
		if len(coef) == 0 {
			for c, v := range row {
				d[c] += v
			}
			continue
		}
		for c, v := range row {
			d[c] += float32(coef[k] * v)
		}
	}
	for c := range d {
		d[c] *= scale
	}
}
