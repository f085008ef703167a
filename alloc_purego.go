//go:build purego

package gather

// uninit returns make([]T, n): with the purego tag the package does not
// link to the runtime's allocator.
func uninit[T plain](n int) []T { return make([]T, n) }
