--[[
  Add to one (queue, minute)'s counts; the hash expires KEEP_S after the minute's first count.

  KEYS[1]  the (queue, minute) hash (keys.throughput_key)

  ARGV[1]  seconds the hash lives (throughput.KEEP_S)
  ARGV[2k], ARGV[2k+1]  a field and what to add to it (k = 1, 2, ...)

  A field's count equal to what was just added is the field's first count of the minute: only
  then is the expiry set, so a page costs one HINCRBY, not HINCRBY + EXPIRE. (The minute's hash
  is written during that minute only, so an expiry set at its first count is at most a minute
  earlier than one renewed at every count.)
]]

local fresh = false
for i = 2, #ARGV, 2 do
  if redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) == tonumber(ARGV[i + 1]) then
    fresh = true
  end
end
if fresh then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
end
return 0
