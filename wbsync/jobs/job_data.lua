--[[
  Replace a job's data, only while the caller still holds the job's lock, so a worker whose lock
  expired (or was taken over) can never overwrite the data of the job's new owner; and, in the
  same call, count the stored page in the queue's throughput history when one is given.

  KEYS[1]  the job's hash key (BullMQ's <prefix>:<queue>:<job id>)
  KEYS[2]  the job's lock key (the hash key + ':lock')
  KEYS[3]  optional: the queue's (queue, minute) throughput hash (keys.throughput_key; the same
           hash tag as the queue's keys, so one slot on a cluster)

  ARGV[1]  the caller's lock token
  ARGV[2]  the new data, JSON (stored in the hash's 'data' field, as BullMQ stores it)
  ARGV[3]  with KEYS[3]: seconds the throughput hash lives
  ARGV[4], ARGV[5]  with KEYS[3]: the field to count and what to add (see throughput.lua)

  Returns
     1     written
     0     not written: the lock is gone or belongs to another token

  A lock that is the caller's proves the job exists: BullMQ deletes a job's lock whenever it
  moves the job out of active or removes it, and refuses to remove a locked job.
]]

if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'data', ARGV[2])
if KEYS[3] then
  if redis.call('HINCRBY', KEYS[3], ARGV[4], ARGV[5]) == tonumber(ARGV[5]) then
    redis.call('EXPIRE', KEYS[3], ARGV[3])
  end
end
return 1
