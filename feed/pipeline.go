package feed

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
)

// A pipeline parses one epoch's blocks of a shard, in order, Workers at
// a time, a window and the workers' blocks ahead of the reader.
type pipeline struct {
	r       *Reader
	cancel  chan struct{}
	jobs    chan job
	pending chan chan *block // the blocks' results, in the epoch's order
	held    *block           // a result received by done, for next
	heldOK  bool
	ended   bool // pending is closed and empty
	wg      sync.WaitGroup
	blocks  *sync.Pool // the Reader's: blocks parsed into, reused across epochs
}

type job struct {
	u   unit
	res chan *block
}

// newPipeline starts parsing epoch's blocks of the reader's shard, after
// the first skip of them.
func newPipeline(r *Reader, epoch, skip int) *pipeline {
	p := &pipeline{r: r, cancel: make(chan struct{}), jobs: make(chan job), pending: make(chan chan *block, r.o.Window+r.o.Workers), blocks: &r.pool}
	for range r.o.Workers {
		p.wg.Add(1)
		go p.work()
	}
	p.wg.Add(1)
	go p.produce(epoch, skip)
	return p
}

// close stops the pipeline's goroutines and waits for them.
func (p *pipeline) close() {
	close(p.cancel)
	p.wg.Wait()
}

func (p *pipeline) putBlock(b *block) { p.blocks.Put(b) }

// next returns the next block in order, false after the last.
func (p *pipeline) next(ctx context.Context) (*block, bool, error) {
	if p.heldOK {
		b := p.held
		p.held, p.heldOK = nil, false
		return b, true, nil
	}
	if p.ended {
		return nil, false, nil
	}
	var res chan *block
	select {
	case res = <-p.pending:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	if res == nil {
		p.ended = true
		return nil, false, nil
	}
	select {
	case b := <-res:
		return b, true, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// done reports whether the blocks are all taken, waiting for the next to
// be known.
func (p *pipeline) done(ctx context.Context) (bool, error) {
	if p.heldOK {
		return false, nil
	}
	b, ok, err := p.next(ctx)
	if err != nil || !ok {
		return !ok, err
	}
	p.held, p.heldOK = b, true
	return false, nil
}

// send queues u to be parsed, or reports that the pipeline is closing.
func (p *pipeline) send(u unit) bool {
	res := make(chan *block, 1)
	select {
	case p.pending <- res:
	case <-p.cancel:
		return false
	}
	select {
	case p.jobs <- job{u, res}:
		return true
	case <-p.cancel:
		return false
	}
}

// fail queues a block that ends the epoch with err.
func (p *pipeline) fail(err error) {
	res := make(chan *block, 1)
	b := p.blocks.Get().(*block)
	b.reset(len(p.r.lay.dense), len(p.r.lay.sparse), p.r.lay.weights)
	b.err = err
	res <- b
	select {
	case p.pending <- res:
	case <-p.cancel:
	}
}

// produce sends the epoch's blocks of the shard, in order, after the
// first skip.
func (p *pipeline) produce(epoch, skip int) {
	defer p.wg.Done()
	defer close(p.jobs)
	r := p.r
	o := r.o
	rng := rand.New(rand.NewPCG(o.Seed, uint64(epoch)))
	files := make([]int, len(r.srcs))
	for i := range files {
		files[i] = i
	}
	if o.Shuffle {
		rng.Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
	}
	global, mine := 0, 0 // the epoch's blocks, and the shard's
	take := func() (parse, ok bool) {
		defer func() { global++ }()
		if global%o.Shards != o.Shard {
			return false, true
		}
		mine++
		return mine > skip, true
	}
	for _, fi := range files {
		src := r.srcs[fi]
		if src.codec == parquetFile {
			groups := make([]int64, len(src.pq.RowGroups()))
			for g := range groups {
				groups[g] = int64(g)
			}
			if o.Shuffle {
				rng.Shuffle(len(groups), func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })
			}
			for _, g := range groups {
				if parse, _ := take(); parse && !p.send(unit{src: fi, start: g}) {
					return
				}
			}
			continue
		}
		if src.codec == plain {
			var starts []int64
			for at := src.dataStart; at < src.size; at += int64(o.BlockBytes) {
				starts = append(starts, at)
			}
			if o.Shuffle {
				rng.Shuffle(len(starts), func(i, j int) { starts[i], starts[j] = starts[j], starts[i] })
			}
			for _, at := range starts {
				if parse, _ := take(); parse && !p.send(unit{src: fi, start: at, end: min(at+int64(o.BlockBytes), src.size)}) {
					return
				}
			}
			continue
		}
		if !p.streamBlocks(fi, take) {
			return
		}
	}
	select {
	case p.pending <- nil:
	case <-p.cancel:
	}
}

// streamBlocks cuts the compressed file fi into blocks as it reads it
// and sends those take says to parse; false if the pipeline closes.
func (p *pipeline) streamBlocks(fi int, take func() (bool, bool)) bool {
	r := p.r
	src := r.srcs[fi]
	z, closer, err := src.stream()
	if err != nil {
		p.fail(err)
		return false
	}
	defer closer()
	br := bufio.NewReaderSize(z, 256<<10)
	var textAt, line int64 = 0, 1
	if r.schema.Header {
		h, err := readLine(br, r.o.MaxLine)
		if err != nil {
			p.fail(fmt.Errorf("feed: %s: %w", src.path, err))
			return false
		}
		textAt, line = int64(len(h))+1, 2
	}
	for {
		var data []byte
		for len(data) < r.o.BlockBytes {
			chunk, err := br.ReadSlice('\n')
			data = append(data, chunk...)
			if errors.Is(err, bufio.ErrBufferFull) {
				if len(data) > r.o.BlockBytes+r.o.MaxLine {
					p.fail(&LineError{File: src.path, Line: line + int64(bytes.Count(data, []byte{'\n'})), Msg: fmt.Sprintf("a line of more than %d bytes (Options.MaxLine)", r.o.MaxLine)})
					return false
				}
				continue
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				p.fail(fmt.Errorf("feed: %s: %v: %w", src.path, err, ErrFormat))
				return false
			}
		}
		if len(data) == 0 {
			return true
		}
		parse, _ := take()
		if parse && !p.send(unit{src: fi, data: data, textAt: textAt, firstLine: line}) {
			return false
		}
		textAt += int64(len(data))
		line += int64(bytes.Count(data, []byte{'\n'}))
		if data[len(data)-1] != '\n' {
			return true // the stream's end
		}
	}
}

// work parses the blocks of jobs.
func (p *pipeline) work() {
	defer p.wg.Done()
	bp := p.r.bufs.Get().(*[]byte)
	defer p.r.bufs.Put(bp)
	buf := *bp
	defer func() { *bp = buf }()
	for {
		select {
		case j, ok := <-p.jobs:
			if !ok {
				return
			}
			b := p.blocks.Get().(*block)
			buf = p.r.parseUnit(j.u, b, buf)
			j.res <- b
		case <-p.cancel:
			return
		}
	}
}

// yieldLines is how many lines a worker parses between yields of its
// thread (runtime.Gosched): a block takes milliseconds, and a training
// step's goroutines that wait behind it would wait until the scheduler
// preempts it.
const yieldLines = 256

// parseUnit parses the lines of u into b, reading a plain file's block
// into buf, and returns buf.
func (r *Reader) parseUnit(u unit, b *block, buf []byte) []byte {
	src := r.srcs[u.src]
	lay := src.layout
	b.reset(len(lay.dense), len(lay.sparse), lay.weights)
	if src.codec == parquetFile {
		r.parseRowGroup(src, int(u.start), b)
		return buf
	}
	text, at := u.data, u.textAt
	if src.codec == plain {
		var err error
		if text, at, buf, err = src.readPlain(u, r.o.MaxLine, buf); err != nil {
			if le, ok := err.(*LineError); ok {
				le.Line = src.lineOf(le.offset)
			}
			b.err = err
			return buf
		}
	}
	lineErr := func(off int64, col int, msg string) *LineError {
		e := &LineError{File: src.path, Column: col, Msg: msg, offset: off}
		if col > 0 && col <= len(lay.fields) {
			e.Name = lay.fields[col-1].name
		}
		if src.codec == plain {
			e.Line = src.lineOf(off)
		} else {
			e.Line = u.firstLine + int64(bytes.Count(u.data[:off-u.textAt], []byte{'\n'}))
		}
		return e
	}
	split := r.o.Split
	pos := 0
	for lines := 1; pos < len(text); lines++ {
		if lines%yieldLines == 0 {
			runtime.Gosched()
		}
		end := bytes.IndexByte(text[pos:], '\n')
		next := pos + end + 1
		if end < 0 {
			end, next = len(text)-pos, len(text)
		}
		line := text[pos : pos+end]
		off := at + int64(pos)
		pos = next
		line = bytes.TrimSuffix(line, []byte{'\r'})
		var col int
		var msg string
		switch {
		case len(line) > r.o.MaxLine:
			msg = fmt.Sprintf("a line of %d bytes, more than Options.MaxLine (%d)", len(line), r.o.MaxLine)
		case !utf8.Valid(line):
			msg = "bytes that are not UTF-8 text"
		case split.Buckets != 0:
			if h := xxhash.Sum64(line) % split.Buckets; h < split.From || h >= split.To {
				continue
			}
			fallthrough
		default:
			col, msg = b.parseLine(lay, line)
		}
		if msg == "" {
			continue
		}
		if r.o.MaxBad > 0 {
			b.bad++
			if b.firstBad == nil {
				b.firstBad = lineErr(off, col, msg)
			}
			continue
		}
		b.err = lineErr(off, col, msg)
		break
	}
	b.finish()
	return buf
}
