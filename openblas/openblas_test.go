package openblas_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/openblas"
)

// Use switches the products when the package was built with OpenBLAS, and
// says it did not otherwise; a product computed after it is right either
// way.
func TestUse(t *testing.T) {
	err := openblas.Use()
	if openblas.Enabled != (err == nil) {
		t.Fatalf("Enabled = %v, Use() = %v", openblas.Enabled, err)
	}
	if err != nil && !errors.Is(err, gather.ErrOption) {
		t.Fatalf("Use() = %v, want an ErrOption error", err)
	}
	g := gorgonia.NewGraph()
	a := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithName("a"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6}))))
	b := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithName("b"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float32{1, 0, 0, 1, 1, 1}))))
	c := gorgonia.Must(gorgonia.Mul(a, b))
	vm := vmtest.New(t, g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	want := []float32{4, 5, 10, 11}
	got := c.Value().Data().([]float32)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("product %v, want %v", got, want)
		}
	}
}

// Use leaves OpenBLAS on one thread when the environment does not say
// otherwise (this test's process is started without OPENBLAS_NUM_THREADS
// by the test below), and leaves the environment's count alone.
func TestUseThreads(t *testing.T) {
	if !openblas.Enabled {
		if openblas.Threads() != 0 {
			t.Fatal("Threads without OpenBLAS")
		}
		t.Skip("built without -tags openblas")
	}
	if os.Getenv("OPENBLAS_TEST_CHILD") == "" {
		for _, env := range []struct{ set, want string }{{"", "1"}, {"2", "2"}} {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestUseThreads$", "-test.v")
			cmd.Env = append(slices.DeleteFunc(os.Environ(), func(s string) bool { return strings.HasPrefix(s, "OPENBLAS_NUM_THREADS=") }), "OPENBLAS_TEST_CHILD="+env.want)
			if env.set != "" {
				cmd.Env = append(cmd.Env, "OPENBLAS_NUM_THREADS="+env.set)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("OPENBLAS_NUM_THREADS=%q: %v\n%s", env.set, err, out)
			}
		}
		return
	}
	if err := openblas.Use(); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(openblas.Threads()); got != os.Getenv("OPENBLAS_TEST_CHILD") {
		t.Fatalf("OpenBLAS runs on %s threads, want %s", got, os.Getenv("OPENBLAS_TEST_CHILD"))
	}
}
