package live

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
)

// ErrFull: a Gate's workers are busy and its queue is full.
var ErrFull = errors.New("over capacity")

// A Gate admits requests: Workers of them are handled at once and Queue
// more wait for a worker; past them a request is refused at once
// (ErrFull), so that a server answers 503 rather than letting requests
// pile up. While the function ExtendWhile gave it reports true (a model
// being loaded beside the one answering), a second Queue of requests may
// wait too: the processor time a reload takes stalls the workers for a
// while, and the requests that arrive meanwhile at a rate the server
// holds are answered late rather than refused. A Gate is safe for
// concurrent use.
type Gate struct {
	admit    chan struct{} // a slot per request admitted: workers + queue
	spare    chan struct{} // a slot per request admitted past admit while extended
	run      chan struct{} // a slot per request being handled
	extended atomic.Pointer[func() bool]
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
	return &Gate{admit: make(chan struct{}, workers+queue), spare: make(chan struct{}, queue), run: make(chan struct{}, workers)}
}

// ExtendWhile makes the gate admit a second queue of requests whenever
// busy reports true: a server passes its Holder's Busy, so that a reload
// or a delta applied does not turn away the requests that arrive while it
// runs. nil ends the extension.
func (g *Gate) ExtendWhile(busy func() bool) {
	if busy == nil {
		g.extended.Store(nil)
		return
	}
	g.extended.Store(&busy)
}

// Enter admits a request and waits for a worker: it returns the function
// that ends the request's turn, to call once it is answered. With every
// worker busy and the queue full it returns an error wrapping ErrFull at
// once; when ctx is done while the request waits (its client left),
// ctx's error.
func (g *Gate) Enter(ctx context.Context) (leave func(), err error) {
	slots := g.admit
	select {
	case g.admit <- struct{}{}:
	default:
		busy := g.extended.Load()
		if busy == nil || !(*busy)() {
			return nil, fmt.Errorf("%d requests handled and %d waiting: %w", g.Workers(), g.Queue(), ErrFull)
		}
		select {
		case g.spare <- struct{}{}:
			slots = g.spare
		default:
			return nil, fmt.Errorf("%d requests handled and %d waiting, during a reload: %w", g.Workers(), 2*g.Queue(), ErrFull)
		}
	}
	select {
	case g.run <- struct{}{}:
		return func() { <-g.run; <-slots }, nil
	case <-ctx.Done():
		<-slots
		return nil, ctx.Err()
	}
}

// Workers returns how many requests are handled at once.
func (g *Gate) Workers() int { return cap(g.run) }

// Queue returns how many requests may wait for a worker.
func (g *Gate) Queue() int { return cap(g.admit) - cap(g.run) }

// Admitted returns the requests admitted now: handled or waiting.
func (g *Gate) Admitted() int { return len(g.admit) + len(g.spare) }

// Waiting returns the requests admitted that wait for a worker.
func (g *Gate) Waiting() int { return max(0, g.Admitted()-len(g.run)) }
