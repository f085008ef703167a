//go:build race

package nn

// raceOn: the race detector's build, under which sync.Pool drops some of
// what is put back, so a count of allocations is not the program's.
const raceOn = true
