--[[
  One pass over the token buckets one call spends (a method group's, the seller's global one),
  kept as GCRA (generic cell rate algorithm): each bucket is a single number, the "theoretical
  arrival time" (TAT, ms): the moment the bucket would be full again. The take is all or
  nothing: either every bucket gives its tokens, or none does and the longest wait is returned.

  KEYS     two per bucket, bucket after bucket (all of one seller: one hash tag, one slot),
           and, only in a pass that gives a penalty, the first bucket's penalty record last:
  KEYS[2i-1]  bucket i's TAT (a string, ms; absent = full bucket)
  KEYS[2i]    bucket i's learned limit (a hash written by learn.lua: interval_ms, burst;
              absent = none): WB showed a stricter bucket than the table, so its slower
              interval and smaller burst apply until the key expires
  KEYS[2n+1]  (penalty > 0 only) the first bucket's penalty record (a hash: until_ms, words),
              written with the penalty; it expires when the penalty lifts

  ARGV[1]  cost          tokens to take now from every bucket, 0..burst; 0 only reads the
                         buckets (and applies a penalty or a level to the first)
  ARGV[2]  penalty_ms    > 0: the first bucket's next token frees no earlier than now +
                         penalty_ms (an upstream 429 said so), and its record says so; 0: none
  ARGV[3]  level         >= 0: the first bucket holds no more than this many tokens (WB showed
                         fewer left than we had); -1: no level
  ARGV[4]  max_wait_ms   the furthest a penalty may push a bucket, and the longest a learned
                         interval may be (ms), > 0
  ARGV[3i+2]  interval_ms   the table's ms for one token of bucket i (period / limit); 0: the
                            bucket has no rate of its own, only penalties (a seller's global
                            bucket when no rate is configured)
  ARGV[3i+3]  burst         the table's capacity of bucket i in tokens, >= 1
  ARGV[3i+4]  margin_ms     added to each of bucket i's token intervals, >= 0
  ARGV[3n+5]  (penalty > 0 only) words: what WB said with the penalty, for its record ("" =
              nothing)
  ARGV[3n+6]  (penalty > 0 only) given back: tokens of the first bucket that the refused
              request took and WB did not count (a 429 serves nothing), returned before the
              penalty applies (never past a full bucket, never before a penalty already in
              force lifts), so the bucket frees when WB said a retry can succeed, not one
              interval later; 0: none

  (The record and the words come only with a penalty: each key and argument is encoded and
  sent on every take, and the take is the hot path.)

  Returns  one integer (the cheapest reply to parse), but for a penalty
    >= 0   acquired (for cost 0: a token is there now in every bucket); the whole tokens the
           first bucket has left
    < 0    not acquired: minus (w * 8 + i - 1), w the whole ms (rounded up) until every bucket
           has the tokens, i the (1-based) bucket that needs the longest of them (at most 8
           buckets a pass)
    {w, i, t}  a pass that gave a penalty: w and i as above, t the Redis clock now (epoch
           ms, rounded down): the penalty lifts at t + penalty_ms

  Time comes from Redis TIME, so every process shares one clock. A TAT is written only when
  its bucket changes, and expires when the bucket would be full again (idle buckets vanish).
]]

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000

local cost = tonumber(ARGV[1])
local penalty = math.min(tonumber(ARGV[2]), tonumber(ARGV[4]))
local level = tonumber(ARGV[3])
local max_wait = tonumber(ARGV[4])
local n = math.floor(#KEYS / 2)

local tats, intervals, takes, changed = {}, {}, {}, {}
local wait, slowest, first_burst = 0, 1, 1

for i = 1, n do
  local interval = tonumber(ARGV[3 * i + 2])
  local burst = tonumber(ARGV[3 * i + 3])
  local take = cost
  if interval > 0 then
    local learned = redis.call('HMGET', KEYS[2 * i], 'interval_ms', 'burst')
    if learned[1] then
      interval = math.max(interval, math.min(tonumber(learned[1]), max_wait))
      burst = math.max(1, math.min(burst, tonumber(learned[2])))
      take = math.min(take, burst)
    end
    interval = interval + tonumber(ARGV[3 * i + 4])
  end
  local tat = tonumber(redis.call('GET', KEYS[2 * i - 1])) or now
  if tat < now then
    tat = now
  end
  -- A bucket without a rate is only its TAT: the moment its penalty lifts.
  local span = 0
  if interval > 0 then
    span = (burst - 1) * interval
  end
  if i == 1 and penalty > 0 then
    local given_back = tonumber(ARGV[3 * n + 6]) or 0
    if given_back > 0 and interval > 0 and tat > now then
      -- Never before a penalty already in force lifts: only the refused request's own token.
      local floor = now
      local lifts = tonumber(redis.call('HGET', KEYS[2 * n + 1], 'until_ms'))
      if lifts and lifts > now then
        floor = lifts + span
      end
      tat = math.min(tat, math.max(floor, tat - given_back * interval))
      changed[i] = true
    end
    -- The first token becomes available when tat - (burst - 1) * interval is reached.
    local penalized = now + penalty + span
    if penalized > tat then
      tat = penalized
      changed[i] = true
    end
  end
  if i == 1 and level >= 0 and level < burst and interval > 0 then
    local leveled = now + (burst - level) * interval
    if leveled > tat then
      tat = leveled
      changed[i] = true
    end
  end
  local ready_at = tat - span
  if interval > 0 then
    ready_at = tat + math.max(take, 1) * interval - interval * burst
  end
  if ready_at - now > wait then
    wait, slowest = ready_at - now, i
  end
  tats[i], intervals[i], takes[i] = tat, interval, take
  if i == 1 then
    first_burst = burst
  end
end

if penalty > 0 then
  local until_ms = now + penalty
  local record = KEYS[2 * n + 1]
  local words = ARGV[3 * n + 5]
  local before = tonumber(redis.call('HGET', record, 'until_ms'))
  if not before or until_ms > before then
    redis.call('HSET', record, 'until_ms', string.format('%.3f', until_ms))
    if words ~= '' then
      redis.call('HSET', record, 'words', words)
    else
      redis.call('HDEL', record, 'words')
    end
    redis.call('PEXPIRE', record, math.max(1, math.ceil(penalty)))
  end
end

local acquired = wait <= 0
for i = 1, n do
  if acquired and cost > 0 and intervals[i] > 0 then
    tats[i] = tats[i] + takes[i] * intervals[i]
    changed[i] = true
  end
  if changed[i] then
    local ttl = math.max(1, math.ceil(tats[i] - now))
    redis.call('SET', KEYS[2 * i - 1], string.format('%.3f', tats[i]), 'PX', ttl)
  end
end

if not acquired then
  if penalty > 0 then
    return {math.ceil(wait), slowest, math.floor(now)}
  end
  return -(math.ceil(wait) * 8 + slowest - 1)
end
if intervals[1] <= 0 then
  return first_burst
end
return math.max(0, math.floor((now + intervals[1] * first_burst - tats[1]) / intervals[1]))
