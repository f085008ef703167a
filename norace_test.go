//go:build !race

package gather

const raceOn = false
