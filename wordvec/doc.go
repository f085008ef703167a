// Package wordvec reads and writes pretrained word vectors in word2vec's
// text and binary formats, fastText's .vec and GloVe's text, for
// nn.WithWeights:
//
//	words, vectors, err := wordvec.Read("glove.6B.50d.txt")
//	emb, err := nn.NewEmbedding(g, "glove", len(words), vectors.Shape()[1],
//		tensor.Float32, nn.WithWeights(vectors), nn.WithFrozen())
//
// A malformed file is an error wrapping checkpoint.ErrFormat that names
// the line (or, in a binary file, the word); nothing larger than the file
// is allocated.
package wordvec
