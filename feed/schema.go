package feed

import (
	"fmt"

	"github.com/gathergrad/gather/internal/errs"
)

// A Role is what a column is to training.
type Role int

const (
	Skip   Role = iota // read past
	Label              // the example's label (a click, a rating): one number
	Dense              // a dense feature: one number, a column of Batch.Dense
	Sparse             // a sparse feature: ids, a key of Batch.Sparse
	Weight             // the per-id weights of the Sparse column WeightOf
)

func (r Role) String() string {
	switch r {
	case Skip:
		return "skip"
	case Label:
		return "label"
	case Dense:
		return "dense"
	case Sparse:
		return "sparse"
	case Weight:
		return "weight"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// An IDFormat is how a Sparse column's text becomes raw 64-bit ids.
type IDFormat int

const (
	// Int ids are decimal integers that fit in an int64 ("-12" too).
	Int IDFormat = iota
	// Hex ids are 1 to 16 hexadecimal digits (Criteo's categorical
	// columns, "68fd1e64"): the 64 bits they spell, as an int64.
	Hex
	// Hash ids are any text: the XXH64 hash (seed 0) of its bytes, as an
	// int64, as github.com/cespare/xxhash/v2's Sum64 computes it.
	Hash
)

// A Transform is applied to a Dense column's value.
type Transform int

const (
	// None keeps the value.
	None Transform = iota
	// Log1p gives log(1 + max(x, 0)): the transform DLRM and TorchRec
	// apply to Criteo's integer features, negatives clamped to 0.
	Log1p
)

// A Column is one field of a line.
type Column struct {
	Name string
	Role Role
	// Fill is the text that stands for an empty field. Without it an
	// empty Label, Dense or Weight field is a malformed line, and an empty
	// Sparse field is an empty bag (no id).
	Fill      string
	Transform Transform // Dense columns
	IDs       IDFormat  // Sparse columns
	// Modulo, if not 0, makes each id of a Sparse column its value as a
	// uint64 modulo Modulo (DLRM's --max-ind-range): ids in [0, Modulo).
	Modulo uint64
	// Split, if not "", separates several values in one field of a
	// Sparse column (a bag: "12|7|9") and of its Weight column.
	Split string
	// WeightOf names the Sparse column whose ids a Weight column
	// weighs, one weight an id. With a Weight column in the schema, the
	// ids of a Sparse column without one weigh 1.
	WeightOf string
}

// A Schema says how to read the lines of delimited text.
type Schema struct {
	// Columns are the line's fields in order, or, with Header, the
	// fields to read by name (the file's other fields are skipped).
	Columns []Column
	// Delimiter separates fields: "\t" when "". It may be several bytes
	// (MovieLens's ratings.dat: "::").
	Delimiter string
	// Header says that each file's first line names its fields,
	// separated by Delimiter.
	Header bool
}

// Criteo returns the schema of Criteo's click logs (the Kaggle Display
// Advertising Challenge's train.txt and the Terabyte set's day files): a
// 0/1 label, 13 integer features I1..I13 (empty fields filled with 0,
// log(1 + max(x, 0)) as DLRM applies it) and 26 hexadecimal categorical
// features C1..C26 (an empty field an empty bag), tab-separated.
func Criteo() Schema {
	cols := []Column{{Name: "label", Role: Label}}
	for i := 1; i <= 13; i++ {
		cols = append(cols, Column{Name: fmt.Sprintf("I%d", i), Role: Dense, Fill: "0", Transform: Log1p})
	}
	for i := 1; i <= 26; i++ {
		cols = append(cols, Column{Name: fmt.Sprintf("C%d", i), Role: Sparse, IDs: Hex})
	}
	return Schema{Columns: cols, Delimiter: "\t"}
}

// MovieLens100K returns the schema of MovieLens 100K's u.data: user id,
// item id, rating, timestamp, tab-separated; the user and the item are
// Sparse features "user" and "item", the rating the label, the
// timestamp skipped.
func MovieLens100K() Schema {
	return Schema{Delimiter: "\t", Columns: movieLens()}
}

// MovieLens1M returns the schema of MovieLens 1M's and 10M's ratings.dat:
// UserID::MovieID::Rating::Timestamp, read as MovieLens100K reads u.data.
func MovieLens1M() Schema {
	return Schema{Delimiter: "::", Columns: movieLens()}
}

func movieLens() []Column {
	return []Column{{Name: "user", Role: Sparse}, {Name: "item", Role: Sparse}, {Name: "rating", Role: Label}, {Name: "timestamp", Role: Skip}}
}

// check reports an error wrapping gather.ErrOption for a schema that
// cannot be read: no label, columns without names or named twice, a
// Weight column of no Sparse column, an unknown role or format.
func (s Schema) check() error {
	names := map[string]int{}
	labels := 0
	for k, c := range s.Columns {
		if c.Name == "" {
			return fmt.Errorf("feed: column %d has no name: %w", k, errs.ErrOption)
		}
		if _, dup := names[c.Name]; dup {
			return fmt.Errorf("feed: column %q is named twice: %w", c.Name, errs.ErrOption)
		}
		names[c.Name] = k
		switch c.Role {
		case Skip, Dense, Sparse, Weight:
		case Label:
			labels++
		default:
			return fmt.Errorf("feed: column %q has role %v: %w", c.Name, c.Role, errs.ErrOption)
		}
		if c.IDs < Int || c.IDs > Hash || c.Transform < None || c.Transform > Log1p {
			return fmt.Errorf("feed: column %q has ids %d and transform %d: %w", c.Name, c.IDs, c.Transform, errs.ErrOption)
		}
	}
	if labels != 1 {
		return fmt.Errorf("feed: %d label columns; a schema has one: %w", labels, errs.ErrOption)
	}
	seen := map[string]bool{}
	for _, c := range s.Columns {
		if c.Role != Weight {
			continue
		}
		k, ok := names[c.WeightOf]
		if !ok || s.Columns[k].Role != Sparse {
			return fmt.Errorf("feed: weight column %q weighs %q, which is no Sparse column: %w", c.Name, c.WeightOf, errs.ErrOption)
		}
		if seen[c.WeightOf] {
			return fmt.Errorf("feed: two weight columns weigh %q: %w", c.WeightOf, errs.ErrOption)
		}
		seen[c.WeightOf] = true
		if c.Split != s.Columns[k].Split {
			return fmt.Errorf("feed: weight column %q splits by %q, its ids' column %q by %q: %w", c.Name, c.Split, c.WeightOf, s.Columns[k].Split, errs.ErrOption)
		}
	}
	return nil
}

// count returns the number of columns of role r.
func (s Schema) count(r Role) int {
	n := 0
	for _, c := range s.Columns {
		if c.Role == r {
			n++
		}
	}
	return n
}
