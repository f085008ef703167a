package kernel

// Plain is the set of element types Uninit may return: none holds a
// pointer, so memory that the garbage collector does not scan can hold
// them.
type Plain interface {
	~float32 | ~float64 | ~int | ~int32 | ~int64
}
