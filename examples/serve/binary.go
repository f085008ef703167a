package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// binaryType is the Content-Type of a binary request and its answer.
const binaryType = "application/octet-stream"

// binaryMagic opens a binary request.
const binaryMagic = "GGB1"

// A binary request is the batch as little-endian arrays, with no
// numbers to parse:
//
//	"GGB1"                      4 bytes
//	n, features, dense          uint32 each: examples, bags an example (3), dense values an example
//	for each feature:
//	    lengths                 n uint32: each example's bag length
//	    ids                     int64, the bags one after another
//	values                      n·dense float32: each example's dense features
//
// Its answer is n float64 probabilities, little-endian, the JSON
// answer's numbers bit for bit. The limits and checks are the JSON
// body's, and errors name fields as they do (examples[i].features[f][k]).
//
// readBinary reads such a request for m; its errors are readJSON's.
func readBinary(body io.Reader, m *model) (*batch, error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("reading the request: %w", err)
	}
	return decodeBinary(raw, m)
}

// decodeBinary checks a binary request for m and flattens it.
func decodeBinary(raw []byte, m *model) (*batch, error) {
	if len(raw) == 0 {
		return nil, errors.New("empty body: POST a binary batch of examples")
	}
	if len(raw) < 16 || string(raw[:4]) != binaryMagic {
		return nil, fmt.Errorf("a binary body starts %q and three uint32 (examples, features, dense values); %d bytes start %q", binaryMagic, len(raw), raw[:min(4, len(raw))])
	}
	u32 := binary.LittleEndian.Uint32
	n, nf, nd := u32(raw[4:]), u32(raw[8:]), u32(raw[12:])
	switch {
	case n == 0 || n > maxExamples:
		return nil, fmt.Errorf("examples: %d of them, not 1 to %d", n, maxExamples)
	case nf != features:
		return nil, fmt.Errorf("features: %d bags an example, not %d (one per feature)", nf, features)
	case int(nd) != m.denseIn():
		return nil, fmt.Errorf("dense: %d values an example, not %d", nd, m.denseIn())
	}
	rest := raw[16:]
	take := func(what string, size int) ([]byte, error) {
		if len(rest) < size {
			return nil, fmt.Errorf("%s: %d bytes, %d left", what, size, len(rest))
		}
		p := rest[:size]
		rest = rest[size:]
		return p, nil
	}
	b := &batch{n: int(n)}
	ids := 0
	for f := range features {
		lens, err := take(fmt.Sprintf("features[%d] lengths", f), 4*int(n))
		if err != nil {
			return nil, err
		}
		total := 0
		for i := range int(n) {
			k := int(u32(lens[4*i:]))
			if k > maxBagIDs {
				return nil, fmt.Errorf("examples[%d].features[%d]: %d ids, over %d", i, f, k, maxBagIDs)
			}
			if ids += k; ids > maxIDs {
				return nil, fmt.Errorf("examples[%d].features[%d]: the request's ids pass %d", i, f, maxIDs)
			}
			total += k
		}
		idb, err := take(fmt.Sprintf("features[%d] ids", f), 8*total)
		if err != nil {
			return nil, err
		}
		b.ids[f] = make([]int64, total)
		for k := range b.ids[f] {
			b.ids[f][k] = int64(binary.LittleEndian.Uint64(idb[8*k:]))
		}
		b.offsets[f] = make([]int64, n)
		at := 0
		for i := range int(n) {
			k := int(u32(lens[4*i:]))
			if err := checkIDs(b.ids[f][at:at+k], m, i, f); err != nil {
				return nil, err
			}
			b.offsets[f][i] = int64(at)
			at += k
		}
	}
	vals, err := take("dense values", 4*int(n)*int(nd))
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("%d bytes after the dense values", len(rest))
	}
	b.dense = make([]float32, int(n)*int(nd))
	for k := range b.dense {
		v := math.Float32frombits(u32(vals[4*k:]))
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("examples[%d].dense[%d] = %v is not a finite number", k/int(nd), k%int(nd), v)
		}
		b.dense[k] = v
	}
	return b, nil
}

// encodeProbabilities writes p as little-endian float64s.
func encodeProbabilities(p []float64) []byte {
	b := make([]byte, 0, 8*len(p))
	for _, x := range p {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}
