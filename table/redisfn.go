package table

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/fileio"
)

// redisLibrary is the Redis Function library that applies optimiser
// steps to rows on the server, each call atomic over its keys (which
// share a hash tag). Redis 7.0's Lua is 5.1: numbers are doubles, and
// rows are packed and unpacked with its struct library, which the
// library's top-level code cannot see, so the callbacks look it up.
//
// The library holds gg_adagrad and gg_adam (see the comment above each).
// gg_adagrad: keys are rows of dim float32 values and one float32 sum;
// args are the learning rate, eps, weight decay and dim, then one
// gradient (dim float32 values) per key. It checks every row and
// gradient before it writes any, so a call that fails changes nothing.
// The arithmetic is optim.RowWiseAdagrad's on float32 rows, in double,
// each stored value rounded to float32.
const redisLibrary = `#!lua name=gathergrad

-- checked returns the rows under keys, each rowBytes long, after checking
-- that each exists and that args[head + i] is its gradient of dim float32
-- values; or nil and the error to reply, before anything is written.
local function checked(keys, args, head, rowBytes, dim)
  local rows = {}
  for i, key in ipairs(keys) do
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

local function adagrad(keys, args)
  local struct, math, tonumber = struct, math, tonumber
  local lr, eps, wd, dim = tonumber(args[1]), tonumber(args[2]), tonumber(args[3]), tonumber(args[4])
  local fmt = '<' .. string.rep('f', dim)
  local rows, err = checked(keys, args, 4, (dim + 1) * 4, dim)
  if not rows then
    return err
  end
  for i, key in ipairs(keys) do
    local w = {struct.unpack(fmt .. 'f', rows[i])}
    local g = {struct.unpack(fmt, args[4 + i])}
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
    redis.call('SET', key, struct.pack(fmt .. 'f', unpack(w, 1, dim + 1)))
  end
  return #keys
end

redis.register_function('gg_adagrad', adagrad)

-- gg_adam: keys are rows of dim float32 values, then dim of each moment;
-- args are b1, 1-b1, b2, 1-b2, eps, the step size and the decay factor
-- (float32 values, as SparseAdam's float32 kernel takes them) and dim,
-- then one gradient per key. Every operation is rounded to float32, as
-- the kernel computes: a double's +, -, *, / and sqrt of float32 values,
-- rounded, is the float32 operation's result.
local function adam(keys, args)
  local struct, math, tonumber = struct, math, tonumber
  local function f(x)
    local y = struct.unpack('<f', struct.pack('<f', x))
    return y
  end
  local b1, c1, b2, c2 = tonumber(args[1]), tonumber(args[2]), tonumber(args[3]), tonumber(args[4])
  local eps, step, decay, dim = tonumber(args[5]), tonumber(args[6]), tonumber(args[7]), tonumber(args[8])
  local fmt = '<' .. string.rep('f', dim)
  local rows, err = checked(keys, args, 8, 3 * dim * 4, dim)
  if not rows then
    return err
  end
  for i, key in ipairs(keys) do
    local r = {struct.unpack(fmt .. string.rep('f', 2 * dim), rows[i])}
    local g = {struct.unpack(fmt, args[8 + i])}
    for j = 1, dim do
      local x = g[j]
      local m = f(f(b1 * r[dim + j]) + f(c1 * x))
      local v = f(f(b2 * r[2 * dim + j]) + f(f(c2 * x) * x))
      r[dim + j], r[2 * dim + j] = m, v
      r[j] = f(f(r[j] * decay) - f(f(step * m) / f(f(math.sqrt(v)) + eps)))
    end
    redis.call('SET', key, struct.pack(fmt .. string.rep('f', 2 * dim), unpack(r, 1, 3 * dim)))
  end
  return #keys
end

redis.register_function('gg_adam', adam)
`

// LoadFunctions loads the library of server-side optimiser steps on
// every master of the cluster (a function load reaches one node), and
// replaces an older one.
func (s *RedisStore) LoadFunctions() error {
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

// StepAdam applies s's step of optim.SparseAdam to float32 rows whose
// state is SparseAdam's moments, on the server, as StepAdagrad applies
// row-wise Adagrad: row ids[k] by grad[k*dim:(k+1)*dim], each row's update
// atomic, to the same bits as SparseAdam's float32 step.
func (s *RedisStore) StepAdam(ids []int64, grad []float32, a AdamStep) error {
	if a.T < 1 {
		return fmt.Errorf("table %q: Adam's step count %d must be at least 1: %w", s.name, a.T, gather.ErrOption)
	}
	t := float64(a.T)
	step := a.LearnRate * math.Sqrt(1-math.Pow(a.Beta2, t)) / (1 - math.Pow(a.Beta1, t))
	decay := 1 - a.LearnRate*a.WeightDecay
	f := func(x float64) string { return strconv.FormatFloat(float64(float32(x)), 'g', -1, 64) }
	head := []any{f(a.Beta1), f(1 - a.Beta1), f(a.Beta2), f(1 - a.Beta2), f(a.Eps), f(step), f(decay)}
	return s.fcall("gg_adam", s.rowBytes/12, ids, grad, head)
}

// StepAdagrad applies optim.RowWiseAdagrad's step to rows on the server:
// row ids[k] by the gradient grad[k*dim:(k+1)*dim], with learning rate
// lr, eps and weight decay wd, for a float32 table whose rows carry
// RowWiseAdagrad's state. Each row's update is atomic, so workers that
// step the same rows at once lose no update; the rows of one hash tag go
// in one call, all calls in one pipelined round trip per master. ids
// must be distinct. LoadFunctions must have run.
func (s *RedisStore) StepAdagrad(ids []int64, grad []float32, lr, eps, wd float64) error {
	head := []any{strconv.FormatFloat(lr, 'g', -1, 64), strconv.FormatFloat(eps, 'g', -1, 64), strconv.FormatFloat(wd, 'g', -1, 64)}
	return s.fcall("gg_adagrad", (s.rowBytes-4)/4, ids, grad, head)
}

// fcall calls the function fn once per hash tag of ids, all calls in one
// pipelined round trip per master, with the arguments head, dim and the
// gradient of each key.
func (s *RedisStore) fcall(fn string, dim int, ids []int64, grad []float32, head []any) error {
	if dim < 1 || len(grad) != len(ids)*dim {
		return fmt.Errorf("table %q: %d gradient values for %d rows of %d: %w", s.name, len(grad), len(ids), dim, gather.ErrShape)
	}
	for k, id := range ids {
		if id < 0 || id >= s.rows {
			return fmt.Errorf("table %q: ids[%d] = %d is outside [0, %d): %w", s.name, k, id, s.rows, gather.ErrIndexOutOfRange)
		}
	}
	groups := map[int64][]int{}
	for k, id := range ids {
		groups[id%redisGroups] = append(groups[id%redisGroups], k)
	}
	head = append(head[:len(head):len(head)], strconv.Itoa(dim))
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	p := s.c.Pipeline()
	for _, ks := range groups {
		keys := make([]string, len(ks))
		args := append(make([]any, 0, len(head)+len(ks)), head...)
		for i, k := range ks {
			keys[i] = s.key(ids[k])
			args = append(args, fileio.LittleEndianBytes(grad[k*dim:(k+1)*dim]))
		}
		p.FCall(ctx, fn, keys, args...)
	}
	if done, err := p.Exec(ctx); err != nil {
		return fmt.Errorf("table %q: stepping %d rows: %w", s.name, len(ids), redisError(s.atNode(done, err)))
	}
	return nil
}
