package openblas_test

import (
	"fmt"
	"log"

	"github.com/gathergrad/gather/openblas"
)

// Use once at the start of a program. Built with -tags openblas it switches
// Gorgonia's products to OpenBLAS and returns nil; without the tag it
// returns an error saying gonum's BLAS stays in use.
func ExampleUse() {
	err := openblas.Use()
	if err != nil {
		log.Print(err) // the program still runs, on gonum's BLAS
	}
	fmt.Println("Use agrees with the build:", openblas.Enabled == (err == nil))
	// Output:
	// Use agrees with the build: true
}
