//go:build purego

package kernel

// Uninit returns make([]T, n): with the purego tag the package does not
// link to the runtime's allocator.
func Uninit[T Plain](n int) []T { return make([]T, n) }
