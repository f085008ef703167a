// Package feed reads the data users have, files of delimited text,
// Parquet files and Redis Streams, into the batches a model trains on: the labels, a dense matrix and the
// sparse features as an nn.KeyedJagged (a Collection's Pack), with
// buffers reused batch after batch.
//
// A Schema says what each column is (Label, Dense, Sparse, Weight or
// Skip), the text that fills an empty field, the transform of a dense
// value (Log1p, as DLRM applies it to Criteo), how a sparse field becomes
// raw 64-bit ids (Int, Hex, or Hash: XXH64 of the text), an optional
// modulo (DLRM's --max-ind-range) and the separator of a field of
// several ids. Criteo, MovieLens100K and MovieLens1M are the schemas of
// those data sets' files; a Schema with Header reads any delimited file
// by its header's names.
//
// Open reads plain, gzip and zstd text and Parquet files (found from
// their first bytes) in one streaming pass, in bounded memory: blocks of
// lines (BlockBytes), or a Parquet file's row groups, are parsed by
// Workers goroutines, a window of them and the workers'
// ahead of the batch being trained. Options shuffle the order of blocks
// and of the examples within a Window of blocks by a seed, repeat
// Epochs, give worker Shard of Shards its own blocks (every example once
// an epoch across the workers), and keep a Split of the examples by a
// hash of their line (train, validation, test). An epoch's last batch is
// padded with examples of weight 0 (Batch.Weights), so that a graph of
// fixed shapes trains and evaluates every example once.
//
// A Parquet file is read through github.com/parquet-go/parquet-go (a
// maintained pure-Go library that reads every codec Parquet writers use,
// with access to a page's levels and values without a copy): the schema's
// columns are found by name, a scalar column gives a row one value and a
// LIST column is a Sparse column's bag (or a Weight column's weights);
// a null is the column's Fill, or with none an empty bag (Sparse) or a
// malformed row.
//
// A Reader is a checkpoint.Part: its State, saved with the model after a
// step, resumes reading after the last batch trained, exactly (SetState
// on a new Reader of the same files and options). A malformed line is a
// *LineError naming the file, line and column, or, with MaxBad, skipped
// and counted (Bad); a hostile file is an error, never a panic
// (FuzzReader).
//
// OpenStream reads a Redis Stream (one Redis, or one key of a Redis
// Cluster) through a consumer group: each entry an example whose fields
// are named by the schema's columns, several workers of a group each
// given their own entries, a batch filled within Linger and padded. A
// Stream is a checkpoint.Part too: saved with the model after each batch
// and acknowledged (Ack) after the save, each entry is trained once in
// the model across crashes (TestStreamKill). A Join makes such a stream
// from two: impressions, and the clicks that come later, each impression
// added as a labelled example once its click comes or its window closes
// (Monolith's online joiner).
//
//	r, _ := feed.Open([]string{"train.txt"}, feed.Criteo(), feed.Options{Batch: 2048, Shuffle: true, Seed: 1})
//	defer r.Close()
//	for {
//		b, err := r.Next(ctx)
//		if err == io.EOF { break }
//		coll.Pack(b.Sparse, values, offsets, nil) // and b.Dense, b.Labels, b.Weights
//	}
package feed
