--[[
  The cabinets with a stored job in one queue, by the structure that holds the job's id: job
  ids only, joined into one string per structure, so a reply for tens of thousands of jobs is
  a few bulk strings (cheap to parse) instead of one element per job.

  KEYS[1..n]  the queue's id lists first (e.g. active, wait, paused), then its sorted sets
              (e.g. prioritized, delayed, failed); every key of the same queue
  ARGV[1]     how many of KEYS are lists (the rest are sorted sets)
  ARGV[2]     the length of the job ids' common start ("<queue>."), cut off each id

  Returns     one string per key, in KEYS order: the ids without their start, comma-separated
              ("" when the structure is empty)
]]

local lists = tonumber(ARGV[1])
local cut = tonumber(ARGV[2]) + 1
local out = {}
for i, key in ipairs(KEYS) do
  local ids
  if i <= lists then
    ids = redis.call('LRANGE', key, 0, -1)
  else
    ids = redis.call('ZRANGE', key, 0, -1)
  end
  for j = 1, #ids do
    ids[j] = string.sub(ids[j], cut)
  end
  out[i] = table.concat(ids, ',')
end
return out
