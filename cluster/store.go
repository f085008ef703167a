package cluster

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/tablerows"
)

// Options say how to reach a Redis Cluster.
type Options struct {
	// Addrs are the addresses (host:port) of some of the cluster's nodes;
	// the client finds the others.
	Addrs []string
	// Username and Password authenticate (AUTH, or an ACL user).
	Username, Password string
	// TLS, if not nil, connects with TLS under this configuration.
	TLS *tls.Config
	// Timeout bounds each attempt of a call to the cluster; 0 means 10 s.
	// A node that does not answer within it is an error naming the node's
	// address.
	Timeout time.Duration
	// Retry is how long ReadRows and WriteRows, which may be repeated
	// safely, keep trying a call that failed for the cluster's sake (a
	// node down, a failover under way), reloading the cluster's layout
	// between attempts; 0 means none. Set it above the cluster's
	// cluster-node-timeout, which a replica waits before it takes over.
	// A write acknowledged by a master that dies before its replica has it
	// is lost, unless Replicas asks the write to wait for its replicas.
	Retry time.Duration
	// Replicas, if above 0, makes WriteRows and the Step methods wait
	// (WAIT, within half the Timeout) until that many replicas of each
	// master they wrote to have the writes; fewer is an error (retried
	// within Retry). A master that dies then loses none of them.
	//
	// A master the cluster lists with fewer live replicas than Replicas
	// (a replica promoted after its master died, until a node joins it as
	// a replica) cannot give that many: by default its writes wait for
	// every replica it has, and each such pipeline is counted in
	// Stats.Degraded, so that training goes on through the loss of
	// a node; those writes are on fewer replicas than asked, and the loss
	// of that master too would lose them. With StrictReplicas such a
	// write is instead an error wrapping ErrFewReplicas that names the
	// master, at once.
	Replicas int
	// StrictReplicas: see Replicas.
	StrictReplicas bool
}

// ErrFewReplicas: a master the store wrote to has fewer live replicas
// than Options.Replicas asks for, and Options.StrictReplicas
// is set. The writes were made on the master.
var ErrFewReplicas = errors.New("fewer replicas than asked for")

// ErrUnknownOutcome: a Step whose calls may have been applied in part or
// in whole when its Options.Retry ran out (a node that did not
// answer, replicas that did not acknowledge). The store keeps the
// update's name: the same Step called again next (the same ids and
// gradient) applies exactly what was not applied, never a call twice.
// Any other Step in between gives the update up, and its outcome stays
// unknown.
var ErrUnknownOutcome = errors.New("outcome unknown")

// Stats counts what a Store met.
type Stats struct {
	// Retries counts calls made again after one failed for the
	// cluster's sake (Options.Retry).
	Retries uint64
	// Degraded counts pipelines of writes acknowledged by fewer replicas
	// than Options.Replicas, because their master had fewer.
	Degraded uint64
	// Pipelines counts the pipelines of rows sent (reads, writes, steps,
	// id maps: one to each master a call reaches, each a round trip),
	// retries included.
	Pipelines uint64
	// StepPipelines counts those of the Step methods' updates
	// (StepTables' included, on the store that sends them).
	StepPipelines uint64
}

// A Store is a Store on a Redis Cluster: each row (values, then
// state) a little-endian binary value under the key
// "gg:<name>:{<id mod 1024>}:<id>", so that rows spread over the
// cluster's masters and a batch's reads or writes are one pipelined round
// trip per master. The key "gg:<name>:meta" records the table's layout,
// which Open checks.
type Store struct {
	c         *redis.ClusterClient
	name      string
	rows      int64
	rowBytes  int
	dim       int             // the values of a row, before its state (Open)
	cols      []driver.Column // the state after them
	dt        tensor.Dtype
	steps     atomic.Int64 // the steps made through the store (Step)
	timeout   time.Duration
	retry     time.Duration
	replicas  int
	strict    bool
	closed    atomic.Bool
	retries   atomic.Uint64
	degraded  atomic.Uint64
	pipes     atomic.Uint64
	stepPipes atomic.Uint64
	fewer     sync.Map // a master's address -> fewerUntil, for masters with fewer replicas than asked

	// The Step methods' updates are named id (random, the store's own)
	// and updates (counting them), one at a time; pending is the update
	// that failed last, if its outcome is unknown.
	stepping sync.Mutex
	id       string
	updates  uint64
	pending  *pendingStep

	// The table's IDMap, and the rows its last Map gave, by row.
	mapMu  sync.Mutex
	idmap  *IDMap
	mapped map[int64]mappedRow
}

// fewerUntil says that a master had live replicas, fewer than a store's
// Replicas, when last asked: its writes wait for that many until the
// time until, when it is asked again.
type fewerUntil struct {
	live  int
	until time.Time
}

// fewerFor is how long a store waits for fewer replicas of a master
// before it asks the master again how many it has.
const fewerFor = 5 * time.Second

// A pendingStep is an update whose outcome is unknown: its number and
// the digest of its function's name and arguments.
type pendingStep struct {
	update uint64
	digest [sha256.Size]byte
}

// redisGroups is how many hash tags a table's keys use.
const redisGroups = 1024

func (s *Store) key(id int64) string {
	return s.rowPrefix(id%redisGroups) + strconv.FormatInt(id, 10)
}

// rowPrefix is the start of the keys of the rows of hash tag tag.
func (s *Store) rowPrefix(tag int64) string {
	return "gg:" + s.name + ":{" + strconv.FormatInt(tag, 10) + "}:"
}

func (s *Store) metaKey() string { return "gg:" + s.name + ":meta" }

// seenKey is the hash that records, for the rows of hash tag tag, the
// last update of each store applied to them.
func (s *Store) seenKey(tag int64) string {
	return "gg:" + s.name + ":{" + strconv.FormatInt(tag, 10) + "}:seen"
}

func newStore(o Options, name string, rowBytes int, dt tensor.Dtype) *Store {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	quietOnce.Do(func() { setRedisLog(nil, false) })
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: o.Addrs, Username: o.Username, Password: o.Password, TLSConfig: o.TLS,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
		ContextTimeoutEnabled: true, // a call's deadline bounds its reads and writes
	})
	return &Store{c: c, name: name, rowBytes: rowBytes, dt: dt, timeout: timeout, retry: o.Retry,
		replicas: o.Replicas, strict: o.StrictReplicas, id: strconv.FormatUint(rand.Uint64(), 36)}
}

// quietOnce silences go-redis's log when the first store is made, unless
// SetLog was called before.
var quietOnce sync.Once

// SetLog sends the messages of go-redis, the Redis client that
// Store uses (such as "failed to dial" while a node is down), to l,
// or discards them if l is nil, which is what happens from the first
// Store on unless SetLog was called before. The client's log
// is one for the whole process: this changes it for every go-redis
// client in the program.
func SetLog(l *log.Logger) { setRedisLog(l, true) }

func setRedisLog(l *log.Logger, explicit bool) {
	if explicit {
		quietOnce.Do(func() {})
	}
	if l == nil {
		redis.SetLogger(&logging.VoidLogger{})
		return
	}
	redis.SetLogger(redisLog{l})
}

// redisLog passes go-redis's messages to a log.Logger.
type redisLog struct{ l *log.Logger }

func (r redisLog) Printf(_ context.Context, format string, v ...any) { r.l.Printf(format, v...) }

// Stats returns what the store has met so far.
func (s *Store) Stats() Stats {
	return Stats{Retries: s.retries.Load(), Degraded: s.degraded.Load(), Pipelines: s.pipes.Load(), StepPipelines: s.stepPipes.Load()}
}

// Create writes the table name to the cluster as table.Create writes a
// file: vocab rows of dim values of dtype dt, from N(0, 1) with
// WithSeed's seed (the values nn.NewEmbedding draws) or by WithInit's
// initialiser, WithPadding's row zero, each followed by WithState's
// state, each value its column's Init. A table of that name
// already on the cluster is an error unless WithReplace is given;
// WithHalf is an error wrapping gather.ErrOption (the cluster's rows are
// float32 or float64).
func Create(ctx context.Context, o Options, name string, vocab int64, dim int, dt tensor.Dtype, opts ...driver.Option) error {
	prefix := fmt.Sprintf("table %q", name)
	var cfg driver.Config
	for _, opt := range opts {
		opt(&cfg)
	}
	if err := operand.CheckFloat(prefix, "dtype", dt); err != nil {
		return err
	}
	if vocab <= 0 || dim <= 0 || name == "" {
		return fmt.Errorf("%s: needs a name, and a positive vocabulary (%d) and dimension (%d): %w", prefix, vocab, dim, errs.ErrShape)
	}
	if cfg.Half != 0 {
		return fmt.Errorf("%s: a table on a Redis Cluster holds float32 or float64 values, not %v (table.WithHalf): %w", prefix, driver.Format(cfg.Half), errs.ErrOption)
	}
	if cfg.HasPad {
		var err error
		if cfg.Pad, err = operand.NormIndex(prefix, cfg.Pad, int(vocab)); err != nil {
			return err
		}
	}
	desc, width, err := tablerows.Describe(prefix, dim, cfg.State)
	if err != nil {
		return err
	}
	s := newStore(o, name, width*int(dt.Size()), dt)
	defer s.Close()
	s.rows = vocab
	var n int64
	err = s.again(ctx, func(ctx context.Context) (err error) {
		n, err = s.c.Exists(ctx, s.metaKey()).Result()
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", prefix, redisError(err))
	}
	if n > 0 && !cfg.Replace {
		return fmt.Errorf("%s: the cluster holds a table of that name; give WithReplace to replace it: %w", prefix, os.ErrExist)
	}
	if n > 0 {
		if err := s.clearMap(ctx); err != nil {
			return fmt.Errorf("%s: %w", prefix, redisError(err))
		}
	}
	if dt == tensor.Float32 {
		err = writeBlocks[float32](ctx, s, cfg, prefix, dt, dim, width)
	} else {
		err = writeBlocks[float64](ctx, s, cfg, prefix, dt, dim, width)
	}
	if err != nil {
		return errs.Prefix(prefix, err)
	}
	meta := fmt.Sprintf("%s;rows=%d;dtype=%v", desc, vocab, dt)
	err = s.again(ctx, func(ctx context.Context) error {
		return s.c.Set(ctx, s.metaKey(), meta, 0).Err()
	})
	if err != nil {
		return fmt.Errorf("%s: %w", prefix, redisError(err))
	}
	return nil
}

// writeBlocks writes the rows of s, block by block, as Create writes a
// file's (see block).
func writeBlocks[T float32 | float64](ctx context.Context, s *Store, cfg driver.Config, prefix string, dt tensor.Dtype, dim, width int) error {
	const rows = kernel.NormalBlock
	buf, wide := make([]T, rows*dim), make([]T, rows*width)
	ids := make([]int64, 0, rows)
	for r0 := int64(0); r0 < s.rows; r0 += rows {
		n := int(min(rows, s.rows-r0))
		v, err := tablerows.Block(cfg, prefix, dt, r0, n, dim, width, buf, wide)
		if err != nil {
			return err
		}
		ids = ids[:0]
		for r := range int64(n) {
			ids = append(ids, r0+r)
		}
		if err := s.WriteRows(ctx, ids, fileio.LittleEndianBytes(v)); err != nil {
			return err
		}
	}
	return nil
}

// Open returns the Store of the table name that Create wrote to
// the cluster, its Schema as the cluster records it: a missing table is
// an error naming it, wrapping checkpoint.ErrMismatch.
func Open(ctx context.Context, o Options, name string) (*Store, error) {
	prefix := fmt.Sprintf("table %q", name)
	s := newStore(o, name, 0, tensor.Float32)
	var meta string
	err := s.again(ctx, func(ctx context.Context) (err error) {
		meta, err = s.c.Get(ctx, s.metaKey()).Result()
		return err
	})
	if err != nil {
		s.Close()
		if errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("%s: the cluster holds no table of that name (no key %q); Create writes one: %w", prefix, s.metaKey(), errMissing)
		}
		return nil, fmt.Errorf("%s: %w", prefix, redisError(err))
	}
	desc, rest, _ := strings.Cut(meta, ";")
	var rows int64
	var dtype string
	dim, cols, err := driver.ParseLayout(desc)
	if err == nil {
		_, err = fmt.Sscanf(rest, "rows=%d;dtype=%s", &rows, &dtype)
	}
	dt, ok := map[string]tensor.Dtype{"float32": tensor.Float32, "float64": tensor.Float64}[dtype]
	if err != nil || !ok || rows <= 0 {
		s.Close()
		return nil, fmt.Errorf("%s: the cluster records its layout as %q, which is not one: %w", prefix, meta, checkpoint.ErrFormat)
	}
	_, width, _ := tablerows.Describe(prefix, dim, cols)
	s.rows, s.dim, s.cols, s.dt, s.rowBytes = rows, dim, cols, dt, width*int(dt.Size())
	return s, nil
}

// errMissing and errMismatch: a table not on the cluster, or not the
// layout asked for; both wrap checkpoint.ErrMismatch.
var (
	errMissing  = fmt.Errorf("no such table: %w", checkpoint.ErrMismatch)
	errMismatch = fmt.Errorf("a table of another layout: %w", checkpoint.ErrMismatch)
)

// Name returns the table's name.
func (s *Store) Name() string { return s.name }

// Schema returns what the table's rows are.
func (s *Store) Schema() driver.Schema {
	return driver.Schema{Name: s.name, Rows: s.rows, Dim: s.dim, Dtype: s.dt, Format: formatOf(s.dt), Columns: s.cols}
}

// formatOf returns the format of a table of dtype dt.
func formatOf(dt tensor.Dtype) driver.Format {
	if dt == tensor.Float64 {
		return driver.Float64
	}
	return driver.Float32
}

func (s *Store) RowBytes() int { return s.rowBytes }
func (s *Store) Rows() int64   { return s.rows }

// ReadRows reads the rows in one pipelined round trip per master. A row
// missing from the cluster, or a value of another length than a row, is
// an error naming its key. Rows the last Map of the store's IDMap
// gave are read once from what that Map read (or, for a new row, its
// initial row), with no call.
func (s *Store) ReadRows(ctx context.Context, ids []int64, dst []byte) error {
	if err := s.check(ids, dst); err != nil {
		return err
	}
	rest, at := s.readMapped(ids, dst)
	if len(rest) == 0 || len(rest) == len(ids) {
		return s.readRows(ctx, rest, dst)
	}
	buf := make([]byte, len(rest)*s.rowBytes)
	if err := s.readRows(ctx, rest, buf); err != nil {
		return err
	}
	for i, k := range at {
		copy(dst[k*s.rowBytes:(k+1)*s.rowBytes], buf[i*s.rowBytes:])
	}
	return nil
}

// readRows reads the rows from the cluster.
func (s *Store) readRows(ctx context.Context, ids []int64, dst []byte) error {
	if len(ids) == 0 {
		return nil
	}
	keys := make([]string, len(ids))
	for k, id := range ids {
		keys[k] = s.key(id)
	}
	cmds := make([]*redis.StringCmd, len(ids))
	err := s.again(ctx, func(ctx context.Context) error {
		return s.onMasters(ctx, keys, readCall, func(ctx context.Context, p redis.Pipeliner, k int) {
			cmds[k] = p.Get(ctx, keys[k])
		})
	})
	if err != nil {
		return fmt.Errorf("table %q: reading %d rows: %w", s.name, len(ids), redisError(err))
	}
	var missing []int
	for k, cmd := range cmds {
		b, err := cmd.Bytes()
		switch {
		case errors.Is(err, redis.Nil):
			missing = append(missing, k)
			continue
		case err != nil:
			return fmt.Errorf("table %q: row %d: %w", s.name, ids[k], redisError(err))
		case len(b) != s.rowBytes:
			return fmt.Errorf("table %q: the key %q holds %d bytes; a row is %d: %w", s.name, keys[k], len(b), s.rowBytes, errMismatch)
		}
		copy(dst[k*s.rowBytes:], b)
	}
	if len(missing) > 0 {
		return s.readMissing(ctx, ids, missing, dst)
	}
	return nil
}

// WriteRows writes the rows in one pipelined round trip per master.
func (s *Store) WriteRows(ctx context.Context, ids []int64, src []byte) error {
	if err := s.check(ids, src); err != nil {
		return err
	}
	// A call given up when ctx is done goes on sending (see attempt):
	// it sends a copy, not the caller's memory.
	src = slices.Clone(src[:len(ids)*s.rowBytes])
	keys := make([]string, len(ids))
	for k, id := range ids {
		keys[k] = s.key(id)
	}
	err := s.again(ctx, func(ctx context.Context) error {
		return s.onMasters(ctx, keys, writeCall, func(ctx context.Context, p redis.Pipeliner, k int) {
			p.Set(ctx, keys[k], src[k*s.rowBytes:(k+1)*s.rowBytes], 0)
		})
	})
	if err != nil {
		return fmt.Errorf("table %q: writing %d rows: %w", s.name, len(ids), redisError(err))
	}
	return nil
}
