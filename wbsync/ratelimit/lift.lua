--[[
  End a bucket's penalty for every process: drop its record and its TAT, so the bucket is
  full and may be used at once.

  KEYS[1]  the bucket's TAT (a string, ms)
  KEYS[2]  the bucket's penalty record (a hash: until_ms, words)

  Returns  {until_ms, words, now_ms} of the penalty that was in force (words "" when WB said
           nothing; until_ms and now_ms as strings, ms on the Redis clock), or false when
           none was: then nothing is changed
]]

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local record = redis.call('HMGET', KEYS[2], 'until_ms', 'words')
if not record[1] or tonumber(record[1]) <= now then
  return false
end
redis.call('DEL', KEYS[1], KEYS[2])
return {record[1], record[2] or '', string.format('%.3f', now)}
