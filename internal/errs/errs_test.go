package errs

import (
	"errors"
	"fmt"
	"testing"
)

// Prefix names a thing once: an error that starts with the prefix keeps
// its message, any other gets it, and both still wrap their sentinel.
func TestPrefix(t *testing.T) {
	for _, c := range []struct {
		name, prefix string
		err          error
		want         string
	}{
		{"named already", `table "t"`, errorf(`table "t": writing 3 rows: %w`, ErrClosed), `table "t": writing 3 rows: used after Close`},
		{"named otherwise", `table "t"`, errorf(`table "u": writing 3 rows: %w`, ErrClosed), `table "t": table "u": writing 3 rows: used after Close`},
		{"a prefix of a longer name", `table "t"`, errorf(`table "t2": %w`, ErrClosed), `table "t": table "t2": used after Close`},
	} {
		got := Prefix(c.prefix, c.err)
		if got.Error() != c.want || !errors.Is(got, ErrClosed) {
			t.Errorf("%s: %q, want %q wrapping ErrClosed", c.name, got, c.want)
		}
	}
}

func errorf(format string, err error) error { return fmt.Errorf(format, err) }
