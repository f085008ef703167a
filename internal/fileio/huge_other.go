//go:build !linux

package fileio

// PreferHugePages does nothing on this system.
func PreferHugePages(b []byte) {}
