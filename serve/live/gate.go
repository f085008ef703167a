package live

import (
	"context"
	"errors"
	"fmt"
	"runtime"
)

// ErrFull: a Gate's workers are busy and its queue is full.
var ErrFull = errors.New("over capacity")

// A Gate admits requests: Workers of them are handled at once and Queue
// more wait for a worker; past them a request is refused at once
// (ErrFull), so that a server answers 503 rather than letting requests
// pile up. A Gate is safe for concurrent use.
type Gate struct {
	admit chan struct{} // a slot per request admitted: workers + queue
	run   chan struct{} // a slot per request being handled
}

// NewGate returns a Gate of workers workers (0 or less: GOMAXPROCS) and
// queue waiting requests (0: 32 a worker; below 0: none).
func NewGate(workers, queue int) *Gate {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if queue == 0 {
		queue = 32 * workers
	}
	queue = max(queue, 0)
	return &Gate{admit: make(chan struct{}, workers+queue), run: make(chan struct{}, workers)}
}

// Enter admits a request and waits for a worker: it returns the function
// that ends the request's turn, to call once it is answered. With every
// worker busy and the queue full it returns an error wrapping ErrFull at
// once; when ctx is done while the request waits (its client left),
// ctx's error.
func (g *Gate) Enter(ctx context.Context) (leave func(), err error) {
	select {
	case g.admit <- struct{}{}:
	default:
		return nil, fmt.Errorf("%d requests handled and %d waiting: %w", g.Workers(), g.Queue(), ErrFull)
	}
	select {
	case g.run <- struct{}{}:
		return func() { <-g.run; <-g.admit }, nil
	case <-ctx.Done():
		<-g.admit
		return nil, ctx.Err()
	}
}

// Workers returns how many requests are handled at once.
func (g *Gate) Workers() int { return cap(g.run) }

// Queue returns how many requests may wait for a worker.
func (g *Gate) Queue() int { return cap(g.admit) - cap(g.run) }

// Admitted returns the requests admitted now: handled or waiting.
func (g *Gate) Admitted() int { return len(g.admit) }

// Waiting returns the requests admitted that wait for a worker.
func (g *Gate) Waiting() int { return max(0, len(g.admit)-len(g.run)) }
