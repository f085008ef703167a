// Package table holds where an embedding table's rows live when they do
// not live in the Go heap: a table in a safetensors file, mapped into
// memory, which may be larger than the machine's memory.
//
// Create makes the file, initialised as nn.NewEmbedding initialises a
// table; Open maps it, and nn.OpenEmbedding makes an embedding of it.
//
//	table.Create("words.safetensors", "words", 20_000_000, 32, tensor.Float32, table.WithSeed(1))
//	emb, _ := nn.OpenEmbedding(g, "words.safetensors", "words")
//	defer emb.Close()
//
// Errors wrap the sentinels of package gather, checkpoint.ErrFormat for a
// malformed file, checkpoint.ErrMismatch for a file that is not a table
// file, or this package's ErrClosed and ErrInUse.
package table
