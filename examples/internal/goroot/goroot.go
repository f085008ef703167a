// Package goroot finds the Go installation whose sources the examples
// read as their corpus.
package goroot

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// Dir returns the root of the Go installation: $GOROOT if set, else what
// `go env GOROOT` prints, else the root this program was built with.
func Dir() string {
	if r := os.Getenv("GOROOT"); r != "" {
		return r
	}
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		if r := strings.TrimSpace(string(out)); r != "" {
			return r
		}
	}
	return runtime.GOROOT()
}
