--[[
  Hands the log mirror a new batch of one shard's decision log: the entries the caller read with
  XRANGE right after the cursor (nextMirrorBatch-3.lua says where it is), if the cursor is still
  there. The cursor is the mirror's consumer group's last-delivered ID; it moves to the batch's
  last entry (with the group's entries-read count, so that its lag stays exact) and no entry
  enters the group's pending list. The batch is recorded in KEYS[2], `firstId -> "lastId count
  prev holder since"`, until ackMirrorBatch-2.lua confirms it: the record is the batch's lease
  (ARGV[2] holds it since ARGV[7]) and fixes its entries and `prev` (KEYS[3]'s `last`, the batch
  handed out before it in this shard's archive chain, '-' for the first), so that whoever
  uploads it again after a crash stores the same object. `last` becomes this batch. A caller
  whose cursor another consumer moved meanwhile is told where it is now and takes nothing.

  KEYS[1] shard log stream     KEYS[2] shard mirror-batches hash     KEYS[3] shard archive-chain hash
  ARGV[1] consumer group       ARGV[2] consumer name       ARGV[3] the cursor the caller read after
  ARGV[4] first entry ID       ARGV[5] last entry ID       ARGV[6] entries in the batch
  ARGV[7] now (ms)

  Returns { 'taken', prev, tip } with tip as KEYS[3] holds it ('' when none), or
  { 'moved', cursor } when the cursor is no longer ARGV[3]. Writes no log entries.
]]
-- @include mirrorGroup

local group = ARGV[1]
local info = mirrorGroup(KEYS[1], group)
local cursor = info and info['last-delivered-id'] or ''
if cursor ~= ARGV[3] then
  return { 'moved', cursor }
end
local read = info['entries-read']
if type(read) == 'number' then
  redis.call('XGROUP', 'SETID', KEYS[1], group, ARGV[5], 'ENTRIESREAD', read + tonumber(ARGV[6]))
else
  redis.call('XGROUP', 'SETID', KEYS[1], group, ARGV[5])
end
local prev = redis.call('HGET', KEYS[3], 'last')
redis.call('HSET', KEYS[2], ARGV[4], ARGV[5] .. ' ' .. ARGV[6] .. ' ' .. prev .. ' ' .. ARGV[2] .. ' ' .. ARGV[7])
redis.call('HSET', KEYS[3], 'last', ARGV[4] .. '_' .. ARGV[5])
return { 'taken', prev, redis.call('HGET', KEYS[3], 'tip') or '' }
