package kernel

// minStream is the output size in bytes from which a gather of rows into a
// new output writes them with streaming stores: the size from which the
// runtime's own copy streams on amd64.
//
// A new output's memory was last used by objects the collector freed, a
// heap's worth of allocations ago, and is seldom still in cache. Ordinary
// stores would first read each of its lines from memory; streaming stores
// write whole lines without reading them, and move half the bytes. An
// output this large does not fit in a core's cache anyway. Outputs into a
// buffer the caller reuses are written with ordinary stores: that memory
// is often still in cache.
const minStream = 1 << 20

// minStreamOutput is the new output size in bytes from which a gather
// streams. A smaller output fits in the processor's last-level cache,
// where the op that consumes it (a product, in a training step) finds it
// when ordinary stores put it there; streamed, it is read back from memory
// (bench/README.md's decision log). A variable only so that tests can
// lower it.
var minStreamOutput uintptr = 8 << 20

// maxStreamSource is the size in bytes of the data gathered from above
// which a gather does not stream. Rows read at random from a table that
// large come from memory, not cache, and streaming stores then compete
// with those reads for memory and gain nothing (bench/README.md's decision
// log).
const maxStreamSource = 32 << 20

// streams reports whether a gather from src into the new output dst, in
// rows of inner elements, should write them with streamCopy: the assembly
// exists, dst is at least minStreamOutput bytes and 16-byte aligned, src
// at most maxStreamSource bytes, every row a whole number of 16 bytes, and
// T holds no pointers (the collector must see every pointer written, which
// streamCopy does not tell it).
func streams[T any](dst, src []T, inner int) bool {
	return !holdsPointers(dst) && streamable(dst, inner) &&
		uintptr(len(dst))*elemSize(dst) >= minStreamOutput &&
		uintptr(len(src))*elemSize(src) <= maxStreamSource
}

// streamable reports whether rows (rows of inner elements) may be written
// with streaming stores of 16 bytes and is large enough to gain from them:
// the assembly exists, rows is at least minStream bytes and 16-byte
// aligned, and every row is a whole number of 16 bytes.
func streamable[T any](rows []T, inner int) bool {
	if !streamStores || len(rows) == 0 {
		return false
	}
	size := elemSize(rows)
	return uintptr(len(rows))*size >= minStream &&
		uintptr(inner)*size%16 == 0 &&
		addr(rows)%16 == 0
}

// holdsPointers reports whether the elements of s hold pointers, for the
// element types the row kernels are instantiated with.
func holdsPointers[T any](s []T) bool {
	switch any(s).(type) {
	case []string, []*byte:
		return true
	}
	return false
}

// batches reports whether takeRows may move rows of inner elements into dst
// in batches with copyRows, or streamRows when stream is set: the assembly
// exists, T holds no pointers, every row is a whole number of 32 bytes, and
// for streamRows dst is 32-byte aligned.
func batches[T any](dst []T, inner int, stream bool) bool {
	if !hasRowAsm || len(dst) == 0 || holdsPointers(dst) {
		return false
	}
	row := uintptr(inner) * elemSize(dst)
	return row%32 == 0 && (!stream || addr(dst)%32 == 0)
}

// streamRow is copy(dst, src) for rows of equal length, with streamCopy.
func streamRow[T any](dst, src []T) {
	if len(dst) == 0 {
		return
	}
	src = src[:len(dst)]
	streamCopy(ptr(dst), ptr(src), uintptr(len(dst))*elemSize(dst))
}

// clearStreamed sets s to zero, with streaming stores for all but its
// unaligned ends when s is at least minStream bytes: a gradient buffer
// that large is seldom in cache, and ordinary stores would first read
// every line of it from memory.
func clearStreamed[T Float](s []T) {
	size := uintptr(len(s)) * sizeOf[T]()
	if !streamStores || size < minStream {
		clear(s)
		return
	}
	p := addr(s)
	head := (-p & 15) / sizeOf[T]() // elements before the first 16-byte boundary
	if (-p&15)%sizeOf[T]() != 0 {
		clear(s) // elements not aligned to their size
		return
	}
	clear(s[:head])
	body := (size - head*sizeOf[T]()) &^ 15
	streamClear(ptr(s[head:]), body)
	clear(s[head+body/sizeOf[T]():])
	storeFence()
}

// writesFirst reports whether a gradient that clears rows (rows of inner
// elements) and then adds into them should use addFirstTouch: whether rows
// is streamable.
func writesFirst[T Float](rows []T, inner int) bool { return streamable(rows, inner) }

// streamScaledRow sets d[k] = 0 + c*g[k] for each k with streaming stores
// (streamScaled32 or streamScaled64): the bits d[k] += c*g[k] gives on a
// cleared d. d must satisfy writesFirst's conditions for its row.
func streamScaledRow[T Float](d, g []T, c T) {
	g = g[:len(d)]
	switch dt := any(d).(type) {
	case []float32:
		streamScaled32(ptr(dt), ptr(g), uintptr(len(dt)), float32(c))
	case []float64:
		streamScaled64(ptr(dt), ptr(g), uintptr(len(dt)), float64(c))
	default:
		for k := range d {
			d[k] = 0 + c*g[k]
		}
	}
}

// The Go twins of the assembly in stream_amd64.s: the same results with
// ordinary stores, which need no fence. They are the reference the
// assembly is tested against, and what the stream functions are without
// assembly.

// streamCopyGo is copy(dst[:n], src[:n]) for bytes.
func streamCopyGo(dst, src *byte, n uintptr) {
	copy(valuesAt[byte](dst, n), valuesAt[byte](src, n))
}

// streamClearGo is clear(dst[:n]) for bytes.
func streamClearGo(dst *byte, n uintptr) {
	clear(valuesAt[byte](dst, n))
}

// streamScaled32Go is dst[i] = 0 + c*src[i] for n float32s.
func streamScaled32Go(dst, src *byte, n uintptr, c float32) {
	d, g := valuesAt[float32](dst, n), valuesAt[float32](src, n)
	for i := range d {
		d[i] = 0 + c*g[i]
	}
}

// streamScaled64Go is dst[i] = 0 + c*src[i] for n float64s.
func streamScaled64Go(dst, src *byte, n uintptr, c float64) {
	d, g := valuesAt[float64](dst, n), valuesAt[float64](src, n)
	for i := range d {
		d[i] = 0 + c*g[i]
	}
}

// storeFenceGo does nothing: ordinary stores need no fence.
func storeFenceGo() {}
