package cluster

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gathergrad/gather/table/driver"

	"github.com/redis/go-redis/v9"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
)

// mappedRows returns, for a Step of the rows ids, the rows the last Map
// of the store's map gave, or nil for a store without a map; a row the
// last Map did not give is an error.
func (s *Store) mappedRows(ids []int64) ([]mappedRow, error) {
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	if s.idmap == nil {
		return nil, nil
	}
	out := make([]mappedRow, len(ids))
	for k, id := range ids {
		x, ok := s.mapped[id]
		if !ok {
			return nil, fmt.Errorf("table %q: row %d of the gradient is not one its id map's last Map gave: %w", s.name, id, errs.ErrGraph)
		}
		out[k] = x
	}
	return out, nil
}

// readMissing fills dst's rows ids[k], k in missing, rows missing on
// the cluster: rows an id map gave (IDMap) whose first step has not
// come, which read as they start (the RowInit the map's options record,
// for the id that holds the row, and each state column at its Init). A
// missing row that no id holds is an error naming its key.
func (s *Store) readMissing(ctx context.Context, ids []int64, missing []int, dst []byte) error {
	keys := make([]string, 0, 2*len(missing))
	for _, k := range missing {
		keys = append(keys, s.key(ids[k]))
	}
	init, ok, err := s.mapInit(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("table %q: row %d is missing (no key %q): %w", s.name, ids[missing[0]], keys[0], errMismatch)
	}
	cmds := make([]*redis.Cmd, len(missing))
	err = s.again(ctx, func(ctx context.Context) error {
		return s.onMasters(ctx, keys, readCall, func(ctx context.Context, p redis.Pipeliner, i int) {
			id := ids[missing[i]]
			cmds[i] = rowAndOwner.Eval(ctx, p, []string{keys[i], s.mapKey(id%redisGroups, "owner")}, id)
		})
	})
	if err != nil {
		return fmt.Errorf("table %q: reading %d rows: %w", s.name, len(missing), redisError(err))
	}
	for i, k := range missing {
		v, err := cmds[i].Slice()
		if err != nil || len(v) != 2 {
			return fmt.Errorf("table %q: reading row %d: %v: %w", s.name, ids[k], err, errMismatch)
		}
		b, isRow := v[0].(string)
		owner, held := v[1].(string)
		raw, perr := strconv.ParseInt(owner, 10, 64)
		switch {
		case isRow && len(b) == s.rowBytes:
			copy(dst[k*s.rowBytes:], b)
		case isRow:
			return fmt.Errorf("table %q: the key %q holds %d bytes; a row is %d: %w", s.name, keys[i], len(b), s.rowBytes, errMismatch)
		case !held || perr != nil:
			return fmt.Errorf("table %q: row %d is missing (no key %q) and no id holds it: %w", s.name, ids[k], keys[i], errMismatch)
		default:
			copy(dst[k*s.rowBytes:], s.initialRow(init, raw))
		}
	}
	return nil
}

// rowAndOwner reads a row and the raw id that holds it, at once.
var rowAndOwner = redis.NewScript(`return {redis.call('GET', KEYS[1]), redis.call('HGET', KEYS[2], ARGV[1])}`)

// mapInit returns the RowInit that the options of the table's id map
// record, and whether the table has a map.
func (s *Store) mapInit(ctx context.Context) (driver.RowInit, bool, error) {
	var desc string
	err := s.again(ctx, func(ctx context.Context) (err error) {
		desc, err = s.c.Get(ctx, s.optionsKey()).Result()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return driver.RowInit{}, false, nil
	}
	if err != nil {
		return driver.RowInit{}, false, fmt.Errorf("table %q: reading its id map's options: %w", s.name, redisError(err))
	}
	_, rest, ok1 := strings.Cut(desc, ";seed=")
	seed, std, ok2 := strings.Cut(rest, ";std=")
	var init driver.RowInit
	var err1, err2 error
	init.Seed, err1 = strconv.ParseUint(seed, 10, 64)
	init.Std, err2 = strconv.ParseFloat(std, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		return driver.RowInit{}, false, fmt.Errorf("table %q: its id map's options are %q, which are not a map's: %w", s.name, desc, checkpoint.ErrFormat)
	}
	return init, true, nil
}

// MapRead is Map that also appends to read the rows it gave, whose
// values it read in the same calls (driver.StoreMapper): a cache's copies
// of them are stale.
func (m *IDMap) MapRead(ctx context.Context, raw, rows []int64, step int64, assigned []driver.Assignment, read []int64) ([]driver.Assignment, []int64, error) {
	assigned, err := m.Map(ctx, raw, rows, step, assigned)
	if err != nil {
		return assigned, read, err
	}
	s := m.s
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	for row := range s.mapped {
		read = append(read, row)
	}
	return assigned, read, nil
}

var _ driver.StoreMapper = (*IDMap)(nil)

// stepped records that the rows of raw were stepped: they exist on the
// cluster now, and what Map read of them is old.
func (s *Store) stepped(raw []mappedRow) {
	if raw == nil {
		return
	}
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	for _, x := range raw {
		if y, ok := s.mapped[x.rowNum]; ok && y.raw == x.raw {
			y.fresh, y.read = false, true // what Map read is old now
			s.mapped[x.rowNum] = y
		}
	}
}

// readMapped copies into dst the rows of ids that the last Map read and
// no ReadRows has served yet, and returns the ids it did not serve and
// their indices in ids.
func (s *Store) readMapped(ids []int64, dst []byte) (rest []int64, at []int) {
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	if len(s.mapped) == 0 {
		return ids, nil
	}
	for k, id := range ids {
		if x, ok := s.mapped[id]; ok && !x.read {
			copy(dst[k*s.rowBytes:(k+1)*s.rowBytes], x.row)
			x.read = true
			s.mapped[id] = x
			continue
		}
		rest = append(rest, id)
		at = append(at, k)
	}
	return rest, at
}

// mapFn is the name of the map's Function.
var mapFn, _ = mapFunction()

// mapFunction returns the name of the map's Function, with a digest of
// its library, and the library.
func mapFunction() (name, library string) {
	sum := sha256.Sum256([]byte(mapLua))
	name = fmt.Sprintf("gg_idmap_%x", sum[:6])
	return name, "#!lua name=" + name + "\n" + mapLua + "redis.register_function('" + name + "', mapIDs)\n"
}

// mapLua maps the ids of one hash tag. Keys: the tag's ids, owner, last,
// uses, cms, stats and free keys (mapKey), then its seen hash. Arguments:
// the update's name (store, number), the step, AdmitAfter, the eviction
// policy, the TTL, the tag, Rows, the prefix of the tag's row keys, and
// n; then for each of n distinct ids: the id (decimal), its sightings in
// the batch, and its sketch cells (4, space-separated; ” without
// admission). It returns, for each id, its row (-1: the default row) and
// the row's bytes (nil: a row now started afresh, missing). An update
// the seen hash records as applied answers its recorded rows again.
const mapLua = `
local function mapIDs(keys, args)
  local tonumber, tostring = tonumber, tostring
  local ids, owner, last, uses, cms, stats, free, seen =
    keys[1], keys[2], keys[3], keys[4], keys[5], keys[6], keys[7], keys[8]
  local store, update = args[1], tonumber(args[2])
  local step, admit, evict, ttl = tonumber(args[3]), tonumber(args[4]), tonumber(args[5]), tonumber(args[6])
  local tag, total, prefix, n = tonumber(args[7]), tonumber(args[8]), args[9], tonumber(args[10])
  local out = {}
  local function reply(rows)
    for i = 1, n do
      out[2 * i - 1] = rows[i]
      out[2 * i] = rows[i] >= 0 and redis.call('GET', prefix .. rows[i]) or false
    end
    return out
  end
  local done = redis.call('HGET', seen, store)
  if done and tonumber(done) >= update then
    local rec = redis.call('HGET', seen, store .. ':map')
    if tonumber(done) ~= update or not rec then
      return redis.error_reply('gathergrad: update ' .. update .. ' of ' .. store .. ' was applied and its reply is gone')
    end
    local rows = {}
    for r in string.gmatch(rec, '%S+') do
      rows[#rows + 1] = tonumber(r)
    end
    return reply(rows)
  end
  local count = {}
  local function add(f, d)
    count[f] = (count[f] or 0) + d
  end
  local function release(r)
    local raw = redis.call('HGET', owner, r)
    if raw then
      redis.call('HDEL', ids, raw)
    end
    redis.call('HDEL', owner, r)
    redis.call('ZREM', last, r)
    redis.call('ZREM', uses, r)
    add('used', -1)
  end
  if ttl > 0 then
    for _, r in ipairs(redis.call('ZRANGEBYSCORE', last, '-inf', '(' .. (step - ttl))) do
      release(r)
      redis.call('RPUSH', free, r)
      add('expired', 1)
    end
  end
  local function use(r)
    if redis.call('ZADD', last, 'GT', 'CH', step, r) == 1 and evict == 1 then
      redis.call('ZINCRBY', uses, 1, r)
    end
  end
  -- a row for a new id: a free one, a row never given, or (evicting) the
  -- row of an id not used at this step
  local function take()
    local r = redis.call('LPOP', free)
    if r then
      return r
    end
    local next = tonumber(redis.call('HGET', stats, 'next') or '0')
    if tag + next * 1024 < total then
      redis.call('HSET', stats, 'next', next + 1)
      return tostring(tag + next * 1024)
    end
    if evict == 2 then
      return nil
    end
    local victim = nil
    if evict == 1 then
      for _, c in ipairs(redis.call('ZRANGE', uses, 0, 15)) do
        if tonumber(redis.call('ZSCORE', last, c)) < step then
          victim = c
          break
        end
      end
    end
    if not victim then
      victim = redis.call('ZRANGEBYSCORE', last, '-inf', '(' .. step, 'LIMIT', 0, 1)[1]
    end
    if victim then
      release(victim)
      add('evicted', 1)
    end
    return victim
  end
  local rows = {}
  local head = 10
  for i = 1, n do
    local raw, sightings, cells = args[head + 3 * i - 2], tonumber(args[head + 3 * i - 1]), args[head + 3 * i]
    local r = redis.call('HGET', ids, raw)
    if r then
      use(r)
    else
      local ok = true
      if admit > 1 then
        local at, c = {}, nil
        for cell in string.gmatch(cells, '%S+') do
          at[#at + 1] = cell
          local v = tonumber(redis.call('HGET', cms, cell) or '0')
          c = c and math.min(c, v) or v
        end
        c = c + sightings
        for _, cell in ipairs(at) do
          if tonumber(redis.call('HGET', cms, cell) or '0') < c then
            redis.call('HSET', cms, cell, c)
          end
        end
        if c < admit then
          ok = false
          add('pending', sightings)
        end
      end
      if ok then
        r = take()
        if r then
          redis.call('HSET', ids, raw, r)
          redis.call('HSET', owner, r, raw)
          redis.call('ZADD', last, step, r)
          if evict == 1 then
            redis.call('ZADD', uses, 1, r)
          end
          redis.call('DEL', prefix .. r)
          add('admitted', 1)
          add('used', 1)
        else
          add('rejected', 1)
        end
      end
    end
    rows[i] = r and tonumber(r) or -1
  end
  for f, d in pairs(count) do
    redis.call('HINCRBY', stats, f, d)
  end
  local rec = {}
  for i = 1, n do
    rec[i] = tostring(rows[i])
  end
  redis.call('HSET', seen, store, update, store .. ':map', table.concat(rec, ' '))
  redis.call('PEXPIRE', seen, 86400000)
  return reply(rows)
end
`
