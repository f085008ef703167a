//go:build !race

package machine_test

const raceOn = false
