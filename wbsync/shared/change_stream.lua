--[[
  Append one numbered entry to the change stream: its counter goes up by one and the entry
  carries the new number, so each entry's number is one more than the entry's before it and a
  reader sees how many entries it never got (trimmed by MAXLEN, or added where it did not read).
  jobs/job_data.lua numbers the entries it appends the same way, with the same keys.

  KEYS[1]  the change stream (keys.change_stream_key)
  KEYS[2]  its entry counter (keys.change_count_key; the stream's hash tag)

  ARGV[1]  MAXLEN (approximate)
  ARGV[2]  the field that carries the entry's number
  ARGV[3..]  field, value, field, value ... to the end

  Returns the entry's number.
]]

local number = redis.call('INCR', KEYS[2])
local fields = {}
for i = 3, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
fields[#fields + 1] = ARGV[2]
fields[#fields + 1] = number
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(fields))
return number
