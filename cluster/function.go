package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gathergrad/gather/table/driver"

	"github.com/redis/go-redis/v9"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
)

// An Encoding is how a Store's servers apply rules of one name: Lua, a
// chunk of Lua 5.1 that returns a function (w, g, p, dim, f) updating in
// place w, one row (its dim float32 values, then its state, as numbers),
// from g, the row's gradient (dim numbers), with the parameters p; f(x)
// rounds x to float32, as Go's float32(x) does. Args returns p for step
// t of the rule r, a value of the type registered; nil takes them from
// the rule's own Params method (driver.Params).
type Encoding struct {
	Lua  string
	Args func(r driver.Rule, t int64) []float64
}

// redisRules holds the registered encodings by rule name.
var redisRules struct {
	sync.RWMutex
	m map[string]redisRule
}

type redisRule struct {
	Encoding
	typ reflect.Type // the rule's Go type
}

// RegisterRule registers how a Store's servers apply rules of the name
// and Go type of r, from a package's init (optim's sparse optimisers:
// package optim/clusterlua, imported for its effect). A name registered
// already, an encoding without Lua, without Args for a rule that
// has no Params method, or a rule with no name is an error wrapping
// gather.ErrOption naming it, and the registered encoding stays.
func RegisterRule(r driver.Rule, e Encoding) error {
	_, params := r.(driver.Params)
	if r == nil || r.Name() == "" || e.Lua == "" || (e.Args == nil && !params) {
		return fmt.Errorf("cluster: RegisterRule needs a named rule, its Lua and its Args (or its Params method): %w", errs.ErrOption)
	}
	if e.Args == nil {
		e.Args = func(r driver.Rule, t int64) []float64 { return r.(driver.Params).Params(t) }
	}
	redisRules.Lock()
	defer redisRules.Unlock()
	if redisRules.m == nil {
		redisRules.m = map[string]redisRule{}
	}
	if old, ok := redisRules.m[r.Name()]; ok {
		return fmt.Errorf("cluster: an encoding of the rule %q is registered already (for %v); give %T another Name: %w",
			r.Name(), old.typ, r, errs.ErrOption)
	}
	redisRules.m[r.Name()] = redisRule{e, reflect.TypeOf(r)}
	return nil
}

// redisEncoding returns the encoding registered for r, or an error
// naming the rule and the table.
func redisEncoding(table string, r driver.Rule) (redisRule, error) {
	redisRules.RLock()
	rr, ok := redisRules.m[r.Name()]
	redisRules.RUnlock()
	if !ok || rr.typ != reflect.TypeOf(r) || rr.Lua == "" || rr.Args == nil {
		return redisRule{}, fmt.Errorf("table %q: a Redis Cluster has no encoding of the rule %q (%T) to apply on its servers "+
			"(RegisterRule; optim's rules: import _ \"github.com/gathergrad/gather/optim/clusterlua\"): %w", table, r.Name(), r, errs.ErrOption)
	}
	return rr, nil
}

// redisPreamble is the part of every rule's Redis Function library that
// reads, checks and writes rows; the rule's Lua computes one row. Redis
// 7.0's Lua is 5.1: numbers are doubles, and rows are packed and
// unpacked with its struct library, which the library's top-level code
// cannot see, so the callbacks look it up.
//
// Every call is one update of rows that share a hash tag, atomic: its
// keys are the rows, then the tag's "seen" hash; its arguments name the
// update (the store's id and its update number), then come dim, the
// number of the rule's parameters, the parameters, and one gradient (dim
// float32 values) per row. An update the seen hash records as applied
// already is not applied again (a call retried after a failover), so
// each is applied exactly once. A call checks every row and gradient
// before it writes any, so a call that fails changes nothing.
const redisPreamble = `
-- checked returns the rows under keys[1..n], each rowBytes long, after
-- checking that each exists and that args[head + i] is its gradient of
-- dim float32 values; or nil and the error to reply, before anything is
-- written.
local function checked(keys, n, args, head, rowBytes, dim)
  local rows = {}
  for i = 1, n do
    local key = keys[i]
    local v = redis.call('GET', key)
    if not v then
      return nil, redis.error_reply('gathergrad: no row under ' .. key)
    end
    if #v ~= rowBytes or rowBytes % 4 ~= 0 or rowBytes < dim * 4 then
      return nil, redis.error_reply('gathergrad: ' .. key .. ' holds ' .. #v .. ' bytes, not a row of ' .. dim .. ' float32 values and their state')
    end
    if args[head + i] == nil or #args[head + i] ~= dim * 4 then
      return nil, redis.error_reply('gathergrad: the gradient for ' .. key .. ' is not ' .. dim .. ' float32 values')
    end
    rows[i] = v
  end
  return rows
end

-- update returns nil if the seen hash records the update args[1],
-- args[2] as applied; else dim, the rule's parameters and the index
-- after them in args.
local function update(seen, args)
  local tonumber = tonumber
  local last = redis.call('HGET', seen, args[1])
  if last and tonumber(last) >= tonumber(args[2]) then
    return nil
  end
  local dim, np = tonumber(args[3]), tonumber(args[4])
  local p = {}
  for i = 1, np do
    p[i] = tonumber(args[4 + i])
  end
  return dim, p, 4 + np
end

-- stepRows applies rule with the parameters p to rows[i], rowBytes long,
-- by grad(i), dim float32 values, and writes it under keys[i], for each
-- i of live; then it records the update args[1], args[2] in the seen
-- hash, for a day.
local function stepRows(rule, keys, rows, live, grad, p, dim, rowBytes, seen, args)
  local struct = struct
  local function f(x)
    local y = struct.unpack('<f', struct.pack('<f', x))
    return y
  end
  local width = rowBytes / 4
  local rowFmt = '<' .. string.rep('f', width)
  local gradFmt = '<' .. string.rep('f', dim)
  for _, i in ipairs(live) do
    local w = {struct.unpack(rowFmt, rows[i])}
    local g = {struct.unpack(gradFmt, grad(i))}
    rule(w, g, p, dim, f)
    redis.call('SET', keys[i], struct.pack(rowFmt, unpack(w, 1, width)))
  end
  redis.call('HSET', seen, args[1], args[2])
  redis.call('PEXPIRE', seen, 86400000)
end

-- apply returns the Function that applies rule, a function of (w, g, p,
-- dim, f) that updates w, a row's float32 values and then its state, by
-- g, its gradient, with the parameters p; f rounds a number to float32.
-- The update args[1], args[2] is applied unless the seen hash (the last
-- key) records it, and then recorded, for a day.
local function apply(rule)
  return function(keys, args)
    local n = #keys - 1
    local seen = keys[n + 1]
    local dim, p, head = update(seen, args)
    if not dim then
      return 0
    end
    local rowBytes = #(redis.call('GET', keys[1]) or '')
    local rows, err = checked(keys, n, args, head, rowBytes, dim)
    if not rows then
      return err
    end
    local live = {}
    for i = 1, n do
      live[i] = i
    end
    stepRows(rule, keys, rows, live, function(i) return args[head + i] end, p, dim, rowBytes, seen, args)
    return n
  end
end

-- applyRaw returns the Function that applies rule to rows an id map
-- gave (IDMap): its keys are the rows, then the tag's seen, owner
-- and stats hashes; after dim, the parameters, each row has three
-- arguments: the raw id it was given to, its gradient, and its initial
-- row ('' if the worker read it). A row whose owner is no longer that id
-- (taken for another since), or that is missing with no initial row (a
-- row started again since the worker read it), is left alone and its
-- gradient counted as dropped; a missing row with its initial row is
-- started from it.
local function applyRaw(rule)
  return function(keys, args)
    local n = #keys - 3
    local seen, owner, stats = keys[n + 1], keys[n + 2], keys[n + 3]
    local dim, p, head = update(seen, args)
    if not dim then
      return 0
    end
    local rows, live, rowBytes = {}, {}, nil
    for i = 1, n do
      local raw, g, init = args[head + 3 * i - 2], args[head + 3 * i - 1], args[head + 3 * i]
      if g == nil or #g ~= dim * 4 then
        return redis.error_reply('gathergrad: the gradient for ' .. keys[i] .. ' is not ' .. dim .. ' float32 values')
      end
      local row = string.match(keys[i], ':(%d+)$')
      local v = false
      if redis.call('HGET', owner, row) == raw then
        v = redis.call('GET', keys[i]) or (#init > 0 and init)
      end
      if v then
        rowBytes = rowBytes or #v
        if #v ~= rowBytes or rowBytes % 4 ~= 0 or rowBytes < dim * 4 then
          return redis.error_reply('gathergrad: ' .. keys[i] .. ' holds ' .. #v .. ' bytes, not a row of ' .. dim .. ' float32 values and their state')
        end
        live[#live + 1] = i
        rows[i] = v
      end
    end
    stepRows(rule, keys, rows, live, function(i) return args[head + 3 * i - 1] end, p, dim, rowBytes or 0, seen, args)
    if #live < n then
      redis.call('HINCRBY', stats, 'dropped', n - #live)
    end
    return #live
  end
end
`

// Function returns the name of the Redis Function by which a
// Store applies rules of r's name ("gg_<name>_<digest>"), for a
// program that calls it itself (FCALL; see Step for its keys and
// arguments): an error for a rule with no registered encoding.
func Function(r driver.Rule) (string, error) {
	rr, err := redisEncoding("", r)
	if err != nil {
		return "", err
	}
	name, _ := redisFunction(r.Name(), rr.Lua)
	return name, nil
}

// redisFunction returns the name of the Redis Function that applies the
// rule name by the Lua lua, and the library that registers it: the name
// holds a digest of the library, so that a rule whose Lua changes is a
// new Function, never the old one under its name.
func redisFunction(rule, lua string) (name, library string) {
	body := redisPreamble + "\nlocal rule = (function()\n" + lua + "\nend)()\n"
	sum := sha256.Sum256([]byte(body))
	name = fmt.Sprintf("gg_%s_%x", rule, sum[:6])
	return name, "#!lua name=" + name + "\n" + body + "redis.register_function('" + name + "', apply(rule))\n" +
		"redis.register_function('" + name + "_raw', applyRaw(rule))\n"
}

// load loads the library of a rule's Function on every master of the
// cluster (a function load reaches one node), replacing one of the same
// name.
func (s *Store) load(ctx context.Context, library string) error {
	return s.again(ctx, func(ctx context.Context) error {
		return s.c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			if err := m.FunctionLoadReplace(ctx, library).Err(); err != nil {
				return fmt.Errorf("loading a Function on %s: %w", m.Options().Addr, err)
			}
			return nil
		})
	})
}

// Step applies r to float32 rows on the servers, as step Steps()+1,
// through a Redis Function that runs r's registered encoding
// (RegisterRule) for each row, loaded on the cluster's masters the
// first time it is missing; the row is stored back as float32 values. A
// rule with no encoding is an error naming it, and nothing is sent. The
// step count is this store's: the steps made through it, by one worker.
//
// Row g.Rows[k] is updated by row k of g.Values. Each row's update is
// atomic, so workers that update the same rows at once lose no update;
// the rows of one hash tag go in one call, all calls in one pipelined
// round trip per master. Each call is applied exactly once: a call that
// fails for the cluster's sake is retried as Options.Retry allows,
// and a call the server applied already (its answer lost to a failover)
// is not applied again; the same Step again after an error wrapping
// ErrUnknownOutcome applies what the first did not. With
// Options.Replicas, it returns once that many replicas of each
// master have its updates. A Store applies rules to float32 rows
// only (its other rows it reads and writes).
func (s *Store) Step(ctx context.Context, r driver.Rule, g *driver.RowGrad) error {
	if r == nil {
		return fmt.Errorf("table %q: Step needs a rule: %w", s.name, errs.ErrOption)
	}
	if s.dt != tensor.Float32 {
		return fmt.Errorf("table %q: a Redis Cluster applies rules to float32 rows; the table's are %v: %w", s.name, s.dt, errs.ErrDtype)
	}
	if err := driver.CheckColumns(r, s.dim, s.cols); err != nil {
		return fmt.Errorf("table %q: %w", s.name, err)
	}
	rr, err := redisEncoding(s.name, r)
	if err != nil {
		return err
	}
	t := s.steps.Load() + 1
	if err := r.Check(t, g, s.dim); err != nil {
		return err
	}
	raw, err := s.mappedRows(g.Rows)
	if err != nil {
		return err
	}
	if err := s.applyRule(ctx, r.Name(), rr.Lua, rr.Args(r, t), g.Rows, s.dim, fileio.LittleEndianBytes(g.Values.Float32s()), raw); err != nil {
		return err
	}
	s.stepped(raw)
	s.steps.Store(t)
	return nil
}

// Steps returns the steps made through the store (Step).
func (s *Store) Steps() int64 { return s.steps.Load() }

// applyRule applies the rule name, whose encoding is lua, with the
// parameters args, to the rows ids, each by its gradient
// grad[k*dim*4:(k+1)*dim*4]; with raw, rows an id map gave (IDMap),
// by the Function that checks each row's raw id.
func (s *Store) applyRule(ctx context.Context, name, lua string, args []float64, ids []int64, dim int, grad []byte, raw []mappedRow) error {
	if dim != s.dim || len(grad) != len(ids)*dim*4 || name == "" || lua == "" {
		return fmt.Errorf("table %q: rule %q: %d gradient bytes for %d rows of %d float32 values; the table's rows are %d wide: %w",
			s.name, name, len(grad), len(ids), dim, s.dim, errs.ErrShape)
	}
	fn, library := redisFunction(name, lua)
	head := []any{strconv.Itoa(dim), strconv.Itoa(len(args))}
	for _, a := range args {
		head = append(head, strconv.FormatFloat(a, 'g', -1, 64))
	}
	if raw != nil {
		fn += "_raw"
	}
	return s.loading(ctx, library, fmt.Sprintf("table %q: rule %q", s.name, name), func() error {
		return s.fcall(ctx, fn, dim, ids, grad, head, raw)
	})
}

// loading runs call, and while it fails on a master that lacks its
// Function (the Function's first call, or a master a failover made of a
// node that never had it), has the masters as the cluster lists them now
// load library, and runs it again, up to 3 times. An error loading it
// is prefixed by prefix; call's errors are its own.
func (s *Store) loading(ctx context.Context, library, prefix string, call func() error) error {
	for tries := 0; ; tries++ {
		err := call()
		if err == nil || !strings.Contains(err.Error(), "Function not found") || tries == 3 {
			return err
		}
		at, cancel := context.WithTimeout(ctx, s.timeout)
		s.c.ReloadState(at)
		cancel()
		if err := s.load(ctx, library); err != nil {
			return fmt.Errorf("%s: %w", prefix, redisError(err))
		}
	}
}

// fcall calls the function fn once per hash tag of ids, all calls in one
// pipelined round trip per master, with the update's name, the
// arguments head, dim and the gradient of each key. With raw (the id
// map's rows, IDMap), each row's arguments are its raw id, its
// gradient and its initial row ("" if the worker read it), and each
// call's keys end in its tag's owner and stats hashes too.
func (s *Store) fcall(ctx context.Context, fn string, dim int, ids []int64, grad []byte, head []any, raw []mappedRow) error {
	if err := s.check(ids, nil); err != nil {
		return err
	}
	calls := s.tagCalls(dim, ids, grad, raw)
	digest := func() [sha256.Size]byte { return callDigest(fn, head, calls) }
	err := s.numbered(ctx, digest, func(ctx context.Context, name []any) error {
		return s.send(ctx, fn, name, head, calls, nil)
	})
	if err == nil || strings.Contains(err.Error(), "Function not found") {
		return err // applyRule loads a Function not found
	}
	return fmt.Errorf("table %q: stepping %d rows: %w", s.name, len(ids), err)
}

// A tagCall is the part of an update for the keys of one hash tag: its
// keys (the first names the tag's slot), and its arguments after the
// update's name and the arguments all tags share.
type tagCall struct {
	keys []string
	args []any
}

// tagCalls returns the calls of an update of the rows ids, one per hash
// tag, in the order of the tags (so that the same update again is the
// same calls), each with the keys and arguments fcall describes. They
// hold a copy of grad: a call given up goes on sending (see attempt).
func (s *Store) tagCalls(dim int, ids []int64, grad []byte, raw []mappedRow) []tagCall {
	grad = slices.Clone(grad)
	groups := map[int64][]int{}
	for k, id := range ids {
		groups[id%redisGroups] = append(groups[id%redisGroups], k)
	}
	tags := slices.Sorted(maps.Keys(groups))
	calls := make([]tagCall, 0, len(groups))
	for _, tag := range tags {
		ks := groups[tag]
		c := tagCall{keys: make([]string, len(ks), len(ks)+3), args: make([]any, 0, 3*len(ks))}
		for i, k := range ks {
			c.keys[i] = s.key(ids[k])
			g := grad[k*dim*4 : (k+1)*dim*4]
			if raw == nil {
				c.args = append(c.args, g)
				continue
			}
			init := []byte{}
			if raw[k].fresh {
				init = raw[k].row
			}
			c.args = append(c.args, strconv.FormatInt(raw[k].raw, 10), g, init)
		}
		c.keys = append(c.keys, s.seenKey(tag))
		if raw != nil {
			c.keys = append(c.keys, s.mapKey(tag, "owner"), s.mapKey(tag, "stats"))
		}
		calls = append(calls, c)
	}
	return calls
}

// send sends the calls of an update named name, whose calls share the
// arguments head, all in one pipelined round trip per master, retried as
// the store's Retry allows; reply, if not nil, gets each call's reply.
func (s *Store) send(ctx context.Context, fn string, name, head []any, calls []tagCall, reply func(k int, v any)) error {
	first := make([]string, len(calls))
	for k, c := range calls {
		first[k] = c.keys[0]
	}
	cmds := make([]*redis.Cmd, len(calls))
	err := s.again(ctx, func(ctx context.Context) error {
		return s.onMasters(ctx, first, stepCall, func(ctx context.Context, p redis.Pipeliner, k int) {
			args := append(slices.Clip(name), head...)
			cmds[k] = p.FCall(ctx, fn, calls[k].keys, append(args, calls[k].args...)...)
		})
	})
	if err != nil || reply == nil {
		return err
	}
	for k, cmd := range cmds {
		v, err := cmd.Result()
		if err != nil {
			return err
		}
		reply(k, v)
	}
	return nil
}

// numbered runs send, the calls of one update, under the update's name
// (the store's id and the update's number), one update at a time. The
// number is the next, unless the last update failed and digest says this
// is the same update again: then it is the failed update's number, so
// that the servers apply what it did not apply, and nothing twice. The
// digest is computed only after an update failed. A failure whose outcome
// may be in part applied wraps ErrUnknownOutcome.
func (s *Store) numbered(ctx context.Context, digest func() [sha256.Size]byte, send func(ctx context.Context, name []any) error) error {
	s.stepping.Lock()
	defer s.stepping.Unlock()
	var d *[sha256.Size]byte
	update := s.updates + 1
	if s.pending != nil {
		x := digest()
		if d = &x; x == s.pending.digest {
			update = s.pending.update // the same update again: its name again
		}
	}
	s.updates = max(s.updates, update)
	err := send(ctx, []any{s.id, strconv.FormatUint(update, 10)})
	if err == nil {
		s.pending = nil
		return nil
	}
	if d == nil {
		x := digest()
		d = &x
	}
	s.pending = &pendingStep{update: update, digest: *d}
	return stepError(ctx, err)
}

// stepError returns the error of an update whose calls failed with err:
// one wrapping ErrUnknownOutcome when some of them may have been applied.
func stepError(ctx context.Context, err error) error {
	switch {
	case strings.Contains(err.Error(), "Function not found"):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("%w (some of its calls may have been applied; "+
			"the same call again applies the rest, exactly once): %w", ErrUnknownOutcome, err)
	case errors.Is(err, driver.ErrClosed) || errors.Is(err, redis.ErrClosed):
		return driver.ErrClosed
	case retryable(err) || errors.Is(err, ErrFewReplicas):
		return fmt.Errorf("%w (some of its calls may have been applied; "+
			"the same call again applies the rest, exactly once): %w", ErrUnknownOutcome, redisError(err))
	}
	return redisError(err)
}

// callDigest returns the digest of an update's function and calls, by
// which the same update made again is known.
func callDigest(fn string, head []any, calls []tagCall) [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintln(h, fn, head, len(calls))
	var n [8]byte
	for _, c := range calls {
		for _, k := range c.keys {
			binary.LittleEndian.PutUint64(n[:], uint64(len(k)))
			h.Write(n[:])
			h.Write([]byte(k))
		}
		for _, a := range c.args {
			b, ok := a.([]byte)
			if !ok {
				b = []byte(a.(string))
			}
			binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
			h.Write(n[:])
			h.Write(b)
		}
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}
