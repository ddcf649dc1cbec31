--[[
  Acknowledges a batch the archive has confirmed storing: its batch record goes (whichever
  consumer holds it now), which lets the shard's trim pass it (trimMirroredLog-3.lua). The
  shard's chain `tip` becomes this batch (its range and content digest) unless a later batch was
  acknowledged first: the newest object the archive confirmed, which `herald audit --verify`
  expects to find there. A batch another consumer acknowledged first (both stored the same
  object) changes nothing.

  KEYS[1] shard mirror-batches hash     KEYS[2] shard archive-chain hash
  ARGV[1] first entry ID       ARGV[2] last entry ID       ARGV[3] entries in the batch
  ARGV[4] SHA-256 of the batch object's content

  Returns the number of entries acknowledged (0 when another consumer acknowledged them first).
  Writes no log entries.
]]
-- @include streamIds

if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local tip = redis.call('HGET', KEYS[2], 'tip')
local tipFirst = tip and string.match(tip, '^(%d+%-%d+)_')
if not tipFirst or idLess(tipFirst, ARGV[1]) then
  redis.call('HSET', KEYS[2], 'tip', ARGV[1] .. '_' .. ARGV[2] .. ' ' .. ARGV[4])
end
return tonumber(ARGV[3])
