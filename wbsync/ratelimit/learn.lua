--[[
  Tighten a bucket's learned limit: what WB's replies showed of its real bucket when that is
  stricter than the table. bucket.lua reads it on every pass; it expires after a TTL, after
  which the table applies again. It only ever tightens (a slower interval, a smaller burst):
  the table is a ceiling, and a looser WB changes nothing.

  KEYS[1]  the learned limit's key (a hash: interval_ms, burst, at: when it last got
           stricter, ms on the Redis clock)
  KEYS[2]  the bucket's TAT (bucket.lua's key, same hash tag): when the limit gets stricter the
           bucket keeps the tokens it holds (never more), counted at the new interval, so a
           request cannot go at the old rate, nor an emptied bucket find tokens a larger
           capacity (slower interval x burst) would seem to give it

  ARGV[1]  interval_ms   the table's milliseconds per token (scaled), > 0
  ARGV[2]  burst         the table's burst, >= 1
  ARGV[3]  seen_ms       WB's interval is at least this (ms); 0: unknown
  ARGV[4]  extra_ms      WB's interval is at least the current one (table or learned) plus
                         this (ms); 0: unknown. Ignored within one current interval of the
                         last tightening: a 429 that soon was sent at the rate that learning
                         replaced (another process met WB's limit at the same moment), so it
                         is the same evidence, and adding it again would hold every process
                         back twice as much
  ARGV[5]  seen_burst    WB's burst; 0: unknown
  ARGV[6]  ttl_ms        how long the learned limit holds from now, > 0
  ARGV[7]  max_ms        the longest interval a learned limit may have (ms), > 0: evidence
                         past it (a hostile header) is cut to it
  ARGV[8]  margin_ms     the bucket's margin on each interval (as bucket.lua adds it), >= 0

  Returns  {changed, interval_ms, burst, stored}: changed 1 when the limit got stricter (0 when
           it stayed, its TTL refreshed, or when WB is no stricter than the table: nothing
           written); interval_ms (whole ms, rounded down) and burst now in force; stored 1
           when the learned limit was written (its TTL starts again), 0 when nothing was
]]

local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local seen = tonumber(ARGV[3])
local extra = tonumber(ARGV[4])
local seen_burst = tonumber(ARGV[5])
local max_interval = math.max(interval, tonumber(ARGV[7]))

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000

local current_interval, current_burst, learned_at = interval, burst, nil
local stored = redis.call('HMGET', KEYS[1], 'interval_ms', 'burst', 'at')
if stored[1] then
  current_interval = math.max(interval, tonumber(stored[1]))
  current_burst = math.min(burst, tonumber(stored[2]))
  learned_at = tonumber(stored[3])
end

local new_interval = math.max(current_interval, seen)
if extra > 0 and not (learned_at and now - learned_at < current_interval) then
  new_interval = math.max(new_interval, current_interval + extra)
end
new_interval = math.min(new_interval, max_interval)
local new_burst = current_burst
if seen_burst > 0 then
  new_burst = math.min(current_burst, seen_burst)
end

if new_interval <= interval and new_burst >= burst then
  return {0, math.floor(interval), burst, 0}
end
local changed = 0
if new_interval > current_interval or new_burst < current_burst then
  changed = 1
end
redis.call('HSET', KEYS[1], 'interval_ms', string.format('%.3f', new_interval), 'burst', new_burst)
if changed == 1 then
  redis.call('HSET', KEYS[1], 'at', string.format('%.3f', now))
end
redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil(tonumber(ARGV[6]))))

local tat = tonumber(redis.call('GET', KEYS[2]))
if changed == 1 and tat then
  local margin = tonumber(ARGV[8])
  local old_i, new_i = current_interval + margin, new_interval + margin
  local held = (now + old_i * current_burst - math.max(tat, now)) / old_i
  held = math.max(0, math.min(held, new_burst))
  local pushed = now + (new_burst - held) * new_i
  if pushed > tat then
    redis.call('SET', KEYS[2], string.format('%.3f', pushed), 'PX', math.max(1, math.ceil(pushed - now)))
  end
end
return {changed, math.floor(new_interval), new_burst, 1}
