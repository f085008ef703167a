package kernel

// prefetchGo is the reference for prefetch: a prefetch only asks the
// processor to load memory into its caches early; it reads nothing from
// Go's point of view and changes no result, so without assembly it does
// nothing.
func prefetchGo(p *byte, n uintptr) {}

// prefetchLinesGo is the reference for prefetchLines:
//
//	for i := range n { prefetchGo(addrs[i], size) }
func prefetchLinesGo(addrs *[rowsAhead]uintptr, n int, size uintptr) {}

// PrefetchRow asks the processor to load the memory of row into its
// caches, for a loop over rows scattered through a large table that will
// read or write row a few iterations later. It changes nothing else; an
// empty row is ignored.
func PrefetchRow[T Float](row []T) {
	if len(row) == 0 {
		return
	}
	prefetch(ptr(row), uintptr(len(row))*elemSize(row))
}
