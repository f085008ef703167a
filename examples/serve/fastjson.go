package main

import (
	"math"
	"strconv"
)

// fastBatch reads a JSON request body straight into a batch for m, for a
// body of exactly the request's shape,
//
//	{"examples": [{"features": [[12, 7], [3], [5]], "dense": [0.1, -1.2, 0.4, 2]}, ...]}
//
// (whitespace anywhere between tokens, the two keys of an example in
// either order) whose examples all pass jsonBatch's checks. It reports
// false for any other body (another key or spelling, an escape, null, a
// number an int64 or float32 field would refuse, a check failed, trailing
// data), and then readJSON decodes the body with encoding/json, whose
// errors name what is wrong: a batch fastBatch returns is the one
// encoding/json and jsonBatch make of the same body (FuzzFastJSON). It
// reads each byte once and allocates the batch alone.
func fastBatch(b []byte, m *model) (*batch, bool) {
	p := jsonParser{b: b}
	if !p.open('{') || !p.key("examples") || !p.open('[') {
		return nil, false
	}
	out := &batch{dense: make([]float32, 0, 64*m.denseIn())}
	ids := 0
	for more := !p.close(']'); more; more = p.next(']') {
		if out.n++; out.n > maxExamples || !p.open('{') {
			return nil, false
		}
		var sawFeatures, sawDense bool
		for more := true; more; more = p.next('}') {
			switch {
			case !sawFeatures && p.key("features"):
				sawFeatures = true
				if !p.open('[') {
					return nil, false
				}
				for f := range features {
					if f > 0 && !p.comma() || !p.open('[') {
						return nil, false
					}
					out.offsets[f] = append(out.offsets[f], int64(len(out.ids[f])))
					start := len(out.ids[f])
					vocab := int64(m.tables[f].Rows())
					for more := !p.close(']'); more; more = p.next(']') {
						id, ok := p.int64()
						if !ok || id < 0 || id >= vocab {
							return nil, false
						}
						out.ids[f] = append(out.ids[f], id)
					}
					n := len(out.ids[f]) - start
					if ids += n; n > maxBagIDs || ids > maxIDs {
						return nil, false
					}
				}
				if !p.close(']') {
					return nil, false
				}
			case !sawDense && p.key("dense"):
				sawDense = true
				start := len(out.dense)
				if !p.open('[') {
					return nil, false
				}
				for more := !p.close(']'); more; more = p.next(']') {
					v, ok := p.float32()
					if !ok {
						return nil, false
					}
					out.dense = append(out.dense, v)
				}
				if len(out.dense)-start != m.denseIn() {
					return nil, false
				}
			default:
				return nil, false
			}
		}
		if !sawFeatures || !sawDense {
			return nil, false
		}
	}
	if out.n == 0 || !p.close('}') || !p.end() {
		return nil, false
	}
	return out, true
}

// A jsonParser reads a JSON text of known shape; each method reports
// false when the text is not what it expects, and the parse stops.
type jsonParser struct {
	b []byte
	i int
}

func (p *jsonParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// open reads c ('{' or '[').
func (p *jsonParser) open(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// close reads c (']' or '}') if it comes next.
func (p *jsonParser) close(c byte) bool { return p.open(c) }

// comma reads a comma.
func (p *jsonParser) comma() bool { return p.open(',') }

// next reads the comma before another element (true) or the closing c
// (false); anything else stops the parse, reported by p.i past the end.
func (p *jsonParser) next(c byte) bool {
	if p.comma() {
		return true
	}
	if !p.close(c) {
		p.i = len(p.b) + 1 // nothing after reads
	}
	return false
}

// key reads "name": with name in plain ASCII, no escape, if it comes
// next; else it reads nothing.
func (p *jsonParser) key(name string) bool {
	p.space()
	at := p.i
	if p.i+len(name)+2 > len(p.b) || p.b[p.i] != '"' || string(p.b[p.i+1:p.i+1+len(name)]) != name || p.b[p.i+1+len(name)] != '"' {
		return false
	}
	p.i += len(name) + 2
	if !p.open(':') {
		p.i = at
		return false
	}
	return true
}

// end reports whether only whitespace is left.
func (p *jsonParser) end() bool {
	p.space()
	return p.i == len(p.b)
}

// number returns the bytes of a JSON number next: -?(0|[1-9][0-9]*)
// (.[0-9]+)?([eE][+-]?[0-9]+)?, and whether it has a fraction or an
// exponent.
func (p *jsonParser) number() (tok []byte, frac, ok bool) {
	p.space()
	b, start := p.b, p.i
	i := start
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return nil, false, false
	}
	digits := func() bool {
		at := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > at
	}
	if i < len(b) && b[i] == '.' {
		i++
		if frac = true; !digits() {
			return nil, false, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if frac = true; !digits() {
			return nil, false, false
		}
	}
	p.i = i
	return b[start:i], frac, true
}

// int64 reads an integer that fits an int64, as encoding/json reads one
// into an int64 field (no fraction or exponent).
func (p *jsonParser) int64() (int64, bool) {
	tok, frac, ok := p.number()
	if !ok || frac {
		return 0, false
	}
	neg := tok[0] == '-'
	if neg {
		tok = tok[1:]
	}
	if len(tok) > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range tok {
		u = u*10 + uint64(c-'0')
	}
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	case neg && u <= 1<<63:
		return int64(-u), true // -(1<<63) wraps to itself
	}
	return 0, false
}

// float32 reads a number as encoding/json reads one into a float32 field
// (strconv.ParseFloat at 32 bits; out of range is an error).
func (p *jsonParser) float32() (float32, bool) {
	tok, _, ok := p.number()
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(tok), 32)
	return float32(v), err == nil
}
