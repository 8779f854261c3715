--[[
  Replace a job's data, only while the caller still holds the job's lock, so a worker whose lock
  expired (or was taken over) can never overwrite the data of the job's new owner.

  KEYS[1]  the job's hash key (BullMQ's <prefix>:<queue>:<job id>)
  KEYS[2]  the job's lock key (the hash key + ':lock')

  ARGV[1]  the caller's lock token
  ARGV[2]  the new data, JSON (stored in the hash's 'data' field, as BullMQ stores it)

  Returns
     1     written
     0     not written: the lock is gone or belongs to another token
    -1     not written: the job does not exist
]]

if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'data', ARGV[2])
return 1
