--[[
  Acknowledges a batch the archive has confirmed storing: its entries leave the consumer
  group's pending list (whichever consumer holds them now) and its batch record goes. Only
  acknowledged entries can be trimmed (trimMirroredLog-1.lua). The shard's chain `tip` becomes
  this batch (its range and content digest) unless a later batch was acknowledged first: the
  newest object the archive confirmed, which `herald audit --verify` expects to find there.

  KEYS[1] shard log stream     KEYS[2] shard mirror-batches hash     KEYS[3] shard archive-chain hash
  ARGV[1] consumer group       ARGV[2] first entry ID      ARGV[3] last entry ID
  ARGV[4] entries in the batch ARGV[5] SHA-256 of the batch object's content

  Returns the number of entries acknowledged (0 when another consumer acknowledged them first).
  Writes no log entries.
]]
-- @include streamIds

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
local tip = redis.call('HGET', KEYS[3], 'tip')
local tipFirst = tip and string.match(tip, '^(%d+%-%d+)_')
if not tipFirst or idLess(tipFirst, ARGV[2]) then
  redis.call('HSET', KEYS[3], 'tip', ARGV[2] .. '_' .. ARGV[3] .. ' ' .. ARGV[5])
end
return acked
