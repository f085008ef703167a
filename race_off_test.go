//go:build !race

package gather

// raceEnabled reports whether the tests run under the race detector, which
// makes sync.Pool drop objects at random.
const raceEnabled = false
