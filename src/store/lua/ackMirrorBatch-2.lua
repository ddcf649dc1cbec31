--[[
  Acknowledges a batch the archive has confirmed storing: its entries leave the consumer
  group's pending list (whichever consumer holds them now) and its batch record goes. Only
  acknowledged entries can be trimmed (trimMirroredLog-1.lua).

  KEYS[1] shard log stream     KEYS[2] shard mirror-batches hash
  ARGV[1] consumer group       ARGV[2] first entry ID      ARGV[3] last entry ID
  ARGV[4] entries in the batch

  Returns the number of entries acknowledged (0 when another consumer acknowledged them first).
  Writes no log entries.
]]
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]))
local acked = 0
local ids = {}
for _, p in ipairs(pending) do
  ids[#ids + 1] = p[1]
  if #ids == 500 then
    acked = acked + redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
    ids = {}
  end
end
if #ids > 0 then
  acked = acked + redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
end
redis.call('HDEL', KEYS[2], ARGV[2])
return acked
