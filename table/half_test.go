package table

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
)

// The half options refuse what they do not do, naming it.
func TestHalfRefuses(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	path := filepath.Join(dir, "t.safetensors")
	if err := Create(path, "t", 10, 4, tensor.Float32, WithHalf(driver.BFloat16)); err != nil {
		t.Fatal(err)
	}
	w := tensor.New(tensor.WithShape(10, 4), tensor.Of(tensor.Float32))
	s, err := NewHalfMemoryStore("t", w, driver.Float16)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		err  error
		want string
		call func() error
	}{
		{errs.ErrOption, "half format float16 for a float64 table", func() error {
			return Create(filepath.Join(dir, "f64"), "t", 10, 4, tensor.Float64, WithHalf(driver.Float16))
		}},
		{errs.ErrOption, "a half table (float16) is float32 and not Shared", func() error {
			_, err := NewCached(ctx, s, CacheOptions{Budget: 1 << 20, Shared: &SharedOptions{}})
			return err
		}},
		{checkpoint.ErrMismatch, "a table Open maps is F32 or F64", func() error {
			_, err := Open(path, "t")
			return err
		}},
		{errs.ErrOption, "half format Format(7)", func() error {
			_, err := NewHalfMemoryStore("t", w, 7)
			return err
		}},
	} {
		err := c.call()
		if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %v naming %q, got %v", c.err, c.want, err)
		}
	}
}
