--[[
  Take, extend or give up leases that one owner at a time may hold (the fan-out leader of each
  queue). A lease is a key holding its owner's id that expires unless the owner extends it.

  KEYS[1..n]  the lease keys (one per queue; they share a hash tag, so one slot)

  ARGV[1]  owner     this process's id
  ARGV[2]  lease_ms  > 0: take each free lease and extend each one the owner holds, for lease_ms;
                     0: give up each lease the owner holds (another owner's lease is untouched)

  Returns  {now_ms, held_1, ..., held_n}: Redis's clock in ms (one clock for every host), then
           1 for each lease the owner holds after this call, 0 otherwise.
]]

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local owner = ARGV[1]
local lease_ms = tonumber(ARGV[2])

local reply = {now}
for i, key in ipairs(KEYS) do
  local holder = redis.call('GET', key)
  local held = 0
  if lease_ms > 0 then
    if holder == owner then
      redis.call('PEXPIRE', key, lease_ms)
      held = 1
    elseif not holder then
      redis.call('SET', key, owner, 'PX', lease_ms)
      held = 1
    end
  elseif holder == owner then
    redis.call('DEL', key)
  end
  reply[i + 1] = held
end
return reply
