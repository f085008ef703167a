// Command bag trains a fastText-style classifier with nn.EmbeddingBag: it
// guesses which part of the Go standard library (crypto, net, encoding,
// runtime, ...) a source file comes from, given the bag of its
// identifiers. Each file is the mean of the embeddings of its first k
// identifiers (id 0 pads short files and stands for rare words; the bag
// skips it), followed by a linear layer and a softmax.
//
// It reads the standard library of the Go installation that runs it, so
// it needs no download. It prints the training progress, the accuracy per
// part and a few held-out predictions, and ends with the line
//
//	held-out accuracy: model X%, majority baseline Y%
//
// Usage:
//
//	go run ./examples/bag [-epochs 30] [-dim 32] [-k 256]
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/gathergrad/gather/openblas"
)

func main() {
	log.SetFlags(0)
	// With -tags openblas the matrix products run in OpenBLAS.
	if err := openblas.Use(); err == nil {
		log.Print("matrix products: OpenBLAS")
	}
	epochs := flag.Int("epochs", 30, "passes over the training files")
	dim := flag.Int("dim", 32, "embedding dimension")
	k := flag.Int("k", 256, "identifiers per file (the bag size)")
	lr := flag.Float64("lr", 0.02, "Adam's learning rate")
	flag.Parse()

	start := time.Now()
	ds, err := loadStdlib(*k)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d files in %d parts of %s, %d identifiers in the vocabulary; %d files to train on, %d held out\n",
		len(ds.train)+len(ds.test), len(ds.classes), ds.root, len(ds.vocab), len(ds.train), len(ds.test))

	m, err := newModel(len(ds.vocab), *dim, *k, len(ds.classes), *lr)
	if err != nil {
		log.Fatal(err)
	}
	defer m.close()
	for epoch := 1; epoch <= *epochs; epoch++ {
		loss, err := m.epoch(ds.train, uint64(epoch))
		if err != nil {
			log.Fatal(err)
		}
		if epoch == 1 || epoch%5 == 0 || epoch == *epochs {
			preds, err := m.predict(ds.test)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("epoch %2d: training loss %.3f, held-out accuracy %.1f%%\n", epoch, loss, 100*accuracy(ds.test, preds))
		}
	}
	preds, err := m.predict(ds.test)
	if err != nil {
		log.Fatal(err)
	}
	report(os.Stdout, ds, preds)
	fmt.Printf("(%.1f s)\n", time.Since(start).Seconds())
	fmt.Printf("held-out accuracy: model %.1f%%, majority baseline %.1f%%\n", 100*accuracy(ds.test, preds), 100*ds.baseline())
}
