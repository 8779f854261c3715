--[[
  One pass of a token bucket, kept as GCRA (generic cell rate algorithm): the bucket is a single
  number, the "theoretical arrival time" (TAT, ms): the moment the bucket would be full again.

  KEYS[1]  the bucket's key (a string holding the TAT in ms; absent = full bucket)
  KEYS[2]  the bucket's learned limit (a hash written by learn.lua: interval_ms, burst; absent
           = none): WB showed a stricter bucket than the table, so its slower interval and
           smaller burst apply until the key expires

  ARGV[1]  interval_ms   the table's milliseconds for one token to refill (period / limit), > 0
  ARGV[2]  burst         the table's bucket capacity in tokens, >= 1
  ARGV[3]  cost          tokens to take now, 0..burst; 0 only reads the bucket (and applies
                         a penalty or a level)
  ARGV[4]  penalty_ms    > 0: the next token frees no earlier than now + penalty_ms (an upstream
                         429 said so); 0: no penalty
  ARGV[5]  margin_ms     added to each token's interval (table or learned), >= 0
  ARGV[6]  level         >= 0: hold no more than this many tokens (WB showed fewer left than
                         we had); -1: no level
  ARGV[7]  max_wait_ms   the furthest a penalty may push the next token, and the longest a
                         learned interval may be (ms), > 0

  Returns  one integer (one number is the cheapest reply to parse)
    >= 0   acquired (for cost 0: a token is there now); the whole tokens left after this pass
    < 0    not acquired; minus the whole milliseconds (rounded up) until the tokens are there

  Time comes from Redis TIME, so every process shares one clock. The key is written only when
  the bucket changes, and expires when the bucket would be full again (idle buckets vanish).
]]

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000

local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local penalty = tonumber(ARGV[4])
local level = tonumber(ARGV[6])
local max_wait = tonumber(ARGV[7])
if penalty > max_wait then
  penalty = max_wait
end

local learned = redis.call('HMGET', KEYS[2], 'interval_ms', 'burst')
if learned[1] then
  interval = math.max(interval, math.min(tonumber(learned[1]), max_wait))
  burst = math.max(1, math.min(burst, tonumber(learned[2])))
  cost = math.min(cost, burst)
end
interval = interval + tonumber(ARGV[5])
local capacity = interval * burst

local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
  tat = now
end
local changed = false

if penalty > 0 then
  -- The first token becomes available when tat - (burst - 1) * interval is reached.
  local penalized = now + penalty + (burst - 1) * interval
  if penalized > tat then
    tat = penalized
    changed = true
  end
end

if level >= 0 and level < burst then
  local leveled = now + (burst - level) * interval
  if leveled > tat then
    tat = leveled
    changed = true
  end
end

local acquired = 1
local wait = 0
local need = math.max(cost, 1)
local ready_at = tat + need * interval - capacity
if ready_at > now then
  acquired = 0
  wait = math.ceil(ready_at - now)
elseif cost > 0 then
  tat = tat + cost * interval
  changed = true
end

if changed then
  redis.call('SET', KEYS[1], string.format('%.3f', tat), 'PX', math.max(1, math.ceil(tat - now)))
end

if acquired == 0 then
  return -wait
end
return math.max(0, math.floor((now + capacity - tat) / interval))
