package table

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/fileio"
)

// redisLibrary is the Redis Function library that applies optimiser
// steps to rows on the server: gg_sgd, gg_adagrad and gg_adam (see the
// comment above each). Redis 7.0's Lua is 5.1: numbers are doubles, and
// rows are packed and unpacked with its struct library, which the
// library's top-level code cannot see, so the callbacks look it up.
//
// Every call is one update of rows that share a hash tag, atomic: its
// keys are the rows, then the tag's "seen" hash; its first two
// arguments name the update (the store's id and its update number), then
// come the optimiser's settings, dim, and one gradient (dim float32
// values) per row. An update the seen hash records as applied already is
// not applied again (a call retried after a failover), so each is
// applied exactly once. A call checks every row and gradient before it
// writes any, so a call that fails changes nothing.
const redisLibrary = `#!lua name=gathergrad

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
    if #v ~= rowBytes then
      return nil, redis.error_reply('gathergrad: ' .. key .. ' holds ' .. #v .. ' bytes; a row is ' .. rowBytes)
    end
    if args[head + i] == nil or #args[head + i] ~= dim * 4 then
      return nil, redis.error_reply('gathergrad: the gradient for ' .. key .. ' is not ' .. dim .. ' float32 values')
    end
    rows[i] = v
  end
  return rows
end

-- once makes step, a function of (keys, n, args) for n rows, exactly
-- once: the update args[1], args[2] is applied unless the seen hash (the
-- last key) records it, and then recorded, for a day.
local function once(step)
  return function(keys, args)
    local n = #keys - 1
    local seen = keys[n + 1]
    local last = redis.call('HGET', seen, args[1])
    if last and tonumber(last) >= tonumber(args[2]) then
      return 0
    end
    local reply = step(keys, n, args)
    if type(reply) == 'table' then
      return reply
    end
    redis.call('HSET', seen, args[1], args[2])
    redis.call('PEXPIRE', seen, 86400000)
    return reply
  end
end

-- gg_sgd: rows of dim float32 values; args (after the update's name) the
-- learning rate and weight decay as float32 values, and dim. Each
-- operation is rounded to float32 as SparseSGD's float32 kernel rounds
-- it (a product is not fused with the sum).
local function sgd(keys, n, args)
  local struct, tonumber = struct, tonumber
  local function f(x)
    local y = struct.unpack('<f', struct.pack('<f', x))
    return y
  end
  local lr, wd, dim = tonumber(args[3]), tonumber(args[4]), tonumber(args[5])
  local fmt = '<' .. string.rep('f', dim)
  local rows, err = checked(keys, n, args, 5, dim * 4, dim)
  if not rows then
    return err
  end
  for i = 1, n do
    local w = {struct.unpack(fmt, rows[i])}
    local g = {struct.unpack(fmt, args[5 + i])}
    for j = 1, dim do
      local d = g[j]
      if wd ~= 0 then
        d = f(d + f(wd * w[j]))
      end
      w[j] = f(w[j] + f(-lr * d))
    end
    redis.call('SET', keys[i], struct.pack(fmt, unpack(w, 1, dim)))
  end
  return n
end

-- gg_adagrad: rows of dim float32 values and one float32 sum; args the
-- learning rate, eps, weight decay and dim. The arithmetic is
-- optim.RowWiseAdagrad's on float32 rows, in double, each stored value
-- rounded to float32.
local function adagrad(keys, n, args)
  local struct, math, tonumber = struct, math, tonumber
  local lr, eps, wd, dim = tonumber(args[3]), tonumber(args[4]), tonumber(args[5]), tonumber(args[6])
  local fmt = '<' .. string.rep('f', dim)
  local rows, err = checked(keys, n, args, 6, (dim + 1) * 4, dim)
  if not rows then
    return err
  end
  for i = 1, n do
    local w = {struct.unpack(fmt .. 'f', rows[i])}
    local g = {struct.unpack(fmt, args[6 + i])}
    local sq = 0.0
    for j = 1, dim do
      local x = g[j] + wd * w[j]
      sq = sq + x * x
    end
    local s = struct.unpack('<f', struct.pack('<f', w[dim + 1] + sq / dim))
    local step = lr / (math.sqrt(s) + eps)
    for j = 1, dim do
      local x = g[j] + wd * w[j]
      w[j] = w[j] - step * x
    end
    w[dim + 1] = s
    redis.call('SET', keys[i], struct.pack(fmt .. 'f', unpack(w, 1, dim + 1)))
  end
  return n
end

-- gg_adam: rows of dim float32 values, then dim of each moment; args b1,
-- 1-b1, b2, 1-b2, eps, the step size and the decay factor (float32
-- values, as SparseAdam's float32 kernel takes them) and dim. Every
-- operation is rounded to float32, as the kernel computes: a double's +,
-- -, *, / and sqrt of float32 values, rounded, is the float32
-- operation's result.
local function adam(keys, n, args)
  local struct, math, tonumber = struct, math, tonumber
  local function f(x)
    local y = struct.unpack('<f', struct.pack('<f', x))
    return y
  end
  local b1, c1, b2, c2 = tonumber(args[3]), tonumber(args[4]), tonumber(args[5]), tonumber(args[6])
  local eps, step, decay, dim = tonumber(args[7]), tonumber(args[8]), tonumber(args[9]), tonumber(args[10])
  local fmt = '<' .. string.rep('f', dim)
  local rows, err = checked(keys, n, args, 10, 3 * dim * 4, dim)
  if not rows then
    return err
  end
  for i = 1, n do
    local r = {struct.unpack(fmt .. string.rep('f', 2 * dim), rows[i])}
    local g = {struct.unpack(fmt, args[10 + i])}
    for j = 1, dim do
      local x = g[j]
      local m = f(f(b1 * r[dim + j]) + f(c1 * x))
      local v = f(f(b2 * r[2 * dim + j]) + f(f(c2 * x) * x))
      r[dim + j], r[2 * dim + j] = m, v
      r[j] = f(f(r[j] * decay) - f(f(step * m) / f(f(math.sqrt(v)) + eps)))
    end
    redis.call('SET', keys[i], struct.pack(fmt .. string.rep('f', 2 * dim), unpack(r, 1, 3 * dim)))
  end
  return n
end

redis.register_function('gg_sgd', once(sgd))
redis.register_function('gg_adagrad', once(adagrad))
redis.register_function('gg_adam', once(adam))
`

// LoadFunctions loads the library of server-side optimiser steps on
// every master of the cluster (a function load reaches one node), and
// replaces an older one.
func (s *RedisStore) LoadFunctions() error {
	if s.closed.Load() {
		return fmt.Errorf("table %q: %w", s.name, ErrClosed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	err := s.c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		if err := m.FunctionLoadReplace(ctx, redisLibrary).Err(); err != nil {
			return fmt.Errorf("loading the functions on %s: %w", m.Options().Addr, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("table %q: %w", s.name, redisError(err))
	}
	return nil
}

// AdamStep is one step of optim.SparseAdam: its settings and the step
// count T of this step (1 for the first).
type AdamStep struct {
	LearnRate, Beta1, Beta2, Eps, WeightDecay float64
	T                                         int64
}

// The Step methods apply an optimiser's step to float32 rows on the
// server, by the library LoadFunctions loads: row ids[k] by the gradient
// grad[k*dim:(k+1)*dim]. ids must be distinct. Each row's update is
// atomic, so workers that step the same rows at once lose no update; the
// rows of one hash tag go in one call, all calls in one pipelined round
// trip per master. Each call is applied exactly once: a Step that fails
// for the cluster's sake is retried as RedisOptions.Retry allows, and a
// call the server applied already (its answer lost to a failover) is not
// applied again. With RedisOptions.Replicas, a Step returns once that
// many replicas of each master have its updates.

// StepSGD applies optim.SparseSGD's float32 step (learning rate lr,
// weight decay wd) to rows without state.
func (s *RedisStore) StepSGD(ids []int64, grad []float32, lr, wd float64) error {
	head := []any{float32Arg(lr), float32Arg(wd)}
	return s.fcall("gg_sgd", s.rowBytes/4, ids, grad, head)
}

// StepAdagrad applies optim.RowWiseAdagrad's step (learning rate lr, eps,
// weight decay wd) to rows whose state is its sum.
func (s *RedisStore) StepAdagrad(ids []int64, grad []float32, lr, eps, wd float64) error {
	head := []any{strconv.FormatFloat(lr, 'g', -1, 64), strconv.FormatFloat(eps, 'g', -1, 64), strconv.FormatFloat(wd, 'g', -1, 64)}
	return s.fcall("gg_adagrad", (s.rowBytes-4)/4, ids, grad, head)
}

// StepAdam applies step a of optim.SparseAdam to rows whose state is its
// moments, to the same bits as SparseAdam's float32 step.
func (s *RedisStore) StepAdam(ids []int64, grad []float32, a AdamStep) error {
	if a.T < 1 {
		return fmt.Errorf("table %q: Adam's step count %d must be at least 1: %w", s.name, a.T, gather.ErrOption)
	}
	t := float64(a.T)
	step := a.LearnRate * math.Sqrt(1-math.Pow(a.Beta2, t)) / (1 - math.Pow(a.Beta1, t))
	decay := 1 - a.LearnRate*a.WeightDecay
	head := []any{float32Arg(a.Beta1), float32Arg(1 - a.Beta1), float32Arg(a.Beta2), float32Arg(1 - a.Beta2), float32Arg(a.Eps), float32Arg(step), float32Arg(decay)}
	return s.fcall("gg_adam", s.rowBytes/12, ids, grad, head)
}

// float32Arg is x rounded to float32, as a Function's argument.
func float32Arg(x float64) string { return strconv.FormatFloat(float64(float32(x)), 'g', -1, 64) }

// fcall calls the function fn once per hash tag of ids, all calls in one
// pipelined round trip per master, with the update's name, the
// arguments head, dim and the gradient of each key.
func (s *RedisStore) fcall(fn string, dim int, ids []int64, grad []float32, head []any) error {
	if dim < 1 || len(grad) != len(ids)*dim || s.dt != tensor.Float32 {
		return fmt.Errorf("table %q: %d gradient values for %d float32 rows of %d (the table's are %v): %w", s.name, len(grad), len(ids), dim, s.dt, gather.ErrShape)
	}
	if err := s.check(ids, nil); err != nil {
		return err
	}
	s.stepping.Lock()
	defer s.stepping.Unlock()
	groups := map[int64][]int{}
	for k, id := range ids {
		groups[id%redisGroups] = append(groups[id%redisGroups], k)
	}
	head = append(head, strconv.Itoa(dim))
	// The digest is computed only after a Step failed: the next Step may
	// be the same one again.
	var digest *[sha256.Size]byte
	update := s.updates + 1
	if s.pending != nil {
		d := stepDigest(fn, ids, grad, head)
		if digest = &d; d == s.pending.digest {
			update = s.pending.update // the same Step again: its update's name again
		}
	}
	s.updates = max(s.updates, update)
	head = append([]any{s.id, strconv.FormatUint(update, 10)}, head...)
	calls := make([]struct {
		keys []string
		args []any
	}, 0, len(groups))
	first := make([]string, 0, len(groups))
	for tag, ks := range groups {
		keys := make([]string, len(ks), len(ks)+1)
		args := append(make([]any, 0, len(head)+len(ks)), head...)
		for i, k := range ks {
			keys[i] = s.key(ids[k])
			args = append(args, fileio.LittleEndianBytes(grad[k*dim:(k+1)*dim]))
		}
		keys = append(keys, s.seenKey(tag))
		calls = append(calls, struct {
			keys []string
			args []any
		}{keys, args})
		first = append(first, keys[0])
	}
	err := s.again(func(ctx context.Context) error {
		return s.onMasters(ctx, first, true, func(ctx context.Context, p redis.Pipeliner, k int) {
			p.FCall(ctx, fn, calls[k].keys, calls[k].args...)
		})
	})
	if err == nil {
		s.pending = nil
		return nil
	}
	if digest == nil {
		d := stepDigest(fn, ids, grad, head[2:])
		digest = &d
	}
	s.pending = &pendingStep{update: update, digest: *digest}
	switch {
	case strings.Contains(err.Error(), "Function not found"):
		return fmt.Errorf("table %q: stepping %d rows: the cluster has not loaded gathergrad's Functions; call LoadFunctions once after CreateRedis: %w",
			s.name, len(ids), err)
	case errors.Is(err, ErrClosed) || errors.Is(err, redis.ErrClosed):
		return fmt.Errorf("table %q: %w", s.name, ErrClosed)
	case retryable(err) || errors.Is(err, ErrFewReplicas):
		return fmt.Errorf("table %q: stepping %d rows: %w (some of its calls may have been applied; "+
			"the same Step again applies the rest, exactly once): %w", s.name, len(ids), ErrUnknownOutcome, redisError(err))
	}
	return fmt.Errorf("table %q: stepping %d rows: %w", s.name, len(ids), redisError(err))
}

// stepDigest returns the digest of a Step's function, rows, gradient and
// arguments head, by which the same Step made again is known.
func stepDigest(fn string, ids []int64, grad []float32, head []any) [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintln(h, fn, head)
	b := make([]byte, 0, 8*len(ids))
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint64(b, uint64(id))
	}
	h.Write(b)
	h.Write(fileio.LittleEndianBytes(grad))
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}
