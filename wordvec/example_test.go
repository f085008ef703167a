package wordvec_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/wordvec"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Pretrained vectors in word2vec's text format, read and used as a frozen
// table.
func ExampleRead() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "vectors.txt")
	if err := os.WriteFile(path, []byte("2 3\ngo 0.5 1 -1\ngopher 0 2 0.25\n"), 0o600); err != nil {
		log.Fatal(err)
	}
	words, vectors, err := wordvec.Read(path)
	if err != nil {
		log.Fatal(err)
	}
	g := gorgonia.NewGraph()
	emb, err := nn.NewEmbedding(g, "pretrained", len(words), vectors.Shape()[1], tensor.Float32,
		nn.WithWeights(vectors), nn.WithFrozen())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(words, emb.Table.Value().Data())
	// Output:
	// [go gopher] [0.5 1 -1 0 2 0.25]
}
