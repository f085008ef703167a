package live_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/gathergrad/gather/serve/live"
)

// A Holder answers with the model current when a request arrives; a
// Reload loads the file again beside it, and a file that does not load
// leaves it answering. A Gate of one worker and no queue refuses a
// second request at once.
func ExampleHolder() {
	dir, err := os.MkdirTemp("", "live")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "greeting.txt")
	os.WriteFile(path, []byte("hello"), 0o644)
	load := func(path string) (string, error) { // the model: a file's text
		b, err := os.ReadFile(path)
		if len(b) == 0 && err == nil {
			err = errors.New("an empty model")
		}
		return string(b), err
	}
	h, err := live.NewHolder(path, load)
	if err != nil {
		log.Fatal(err)
	}
	answer := func() {
		m := h.Current() // the model of this request, whatever reload comes
		fmt.Printf("%s (version %s)\n", m.Model, strings.SplitN(m.Version, "-", 2)[0])
	}
	answer()
	os.WriteFile(path, []byte("bonjour"), 0o644)
	if _, err := h.Reload(); err != nil {
		log.Fatal(err)
	}
	answer()
	os.WriteFile(path, nil, 0o644)
	_, err = h.Reload()
	fmt.Println("reload:", err)
	answer()

	gate := live.NewGate(1, -1)
	leave, _ := gate.Enter(context.Background())
	_, err = gate.Enter(context.Background())
	fmt.Println(errors.Is(err, live.ErrFull), err)
	leave()
	// Output:
	// hello (version 1)
	// bonjour (version 2)
	// reload: an empty model
	// bonjour (version 2)
	// true 1 requests handled and 0 waiting: over capacity
}
