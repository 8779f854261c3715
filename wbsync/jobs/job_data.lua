--[[
  Replace a job's data, only while the caller still holds the job's lock, so a worker whose lock
  expired (or was taken over) can never overwrite the data of the job's new owner; and, in the
  same call, what goes with a stored page: its count in the queue's throughput history, the
  run's start lag (the first write of a run), and the page's change-stream event.

  KEYS[1]  the job's hash key (BullMQ's <prefix>:<queue>:<job id>)
  KEYS[2]  the job's lock key (the hash key + ':lock')
  KEYS[3..]  one key per letter of ARGV[3], in its order:
           t  the queue's (queue, minute) throughput hash (keys.throughput_key)
           l  the queue's list of recent lags (keys.lag_key)
           n  the stream entry's counter (keys.change_count_key): INCR'd, and its new value
              appended to the entry (as change_stream.lua does); only with s
           s  the change stream (keys.change_stream_key; another slot on a cluster, where the
              caller sends it apart)

  ARGV[1]  the caller's lock token
  ARGV[2]  the new data, JSON (stored in the hash's 'data' field, as BullMQ stores it)
  ARGV[3]  the parts present: a string of the letters above, in the order t, l, n, s ('' for
           none)
  ARGV[4..]  each part's arguments, in the same order:
           t  seconds the hash lives; the field to count; what to add (see throughput.lua)
           l  the entry '<started ms>:<lag ms>'; entries kept; seconds the list lives
           n  the field that carries the entry's number
           s  MAXLEN (approximate); then field, value, field, value ... to the end

  Returns
     1     written
     0     not written: the lock is gone or belongs to another token (the change-stream event
           is appended all the same: its rows are committed whoever owns the job now)

  A lock that is the caller's proves the job exists: BullMQ deletes a job's lock whenever it
  moves the job out of active or removes it, and refuses to remove a locked job.
]]

local parts = ARGV[3]
local key, arg = 3, 4
local throughput, lag, counter

if string.find(parts, 't', 1, true) then
  throughput = {KEYS[key], ARGV[arg], ARGV[arg + 1], ARGV[arg + 2]}
  key, arg = key + 1, arg + 3
end
if string.find(parts, 'l', 1, true) then
  lag = {KEYS[key], ARGV[arg], ARGV[arg + 1], ARGV[arg + 2]}
  key, arg = key + 1, arg + 3
end
if string.find(parts, 'n', 1, true) then
  counter = {KEYS[key], ARGV[arg]}
  key, arg = key + 1, arg + 1
end
if string.find(parts, 's', 1, true) then
  local fields = {}
  for i = arg + 1, #ARGV do
    fields[#fields + 1] = ARGV[i]
  end
  if counter then
    fields[#fields + 1] = counter[2]
    fields[#fields + 1] = redis.call('INCR', counter[1])
  end
  redis.call('XADD', KEYS[key], 'MAXLEN', '~', ARGV[arg], '*', unpack(fields))
end

if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'data', ARGV[2])
if throughput then
  if redis.call('HINCRBY', throughput[1], throughput[3], throughput[4]) == tonumber(throughput[4]) then
    redis.call('EXPIRE', throughput[1], throughput[2])
  end
end
if lag then
  redis.call('LPUSH', lag[1], lag[2])
  redis.call('LTRIM', lag[1], 0, tonumber(lag[3]) - 1)
  redis.call('EXPIRE', lag[1], lag[4])
end
return 1
