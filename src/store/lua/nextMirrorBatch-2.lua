--[[
  Hands the log mirror its next batch of one shard's decision log, read through the mirror's
  consumer group. In order of preference:
    'own'     the oldest batch this consumer read and has not acknowledged (its upload failed);
    'claimed' the oldest batch another consumer has held for at least ARGV[4] ms (it died or
              hangs), taken over whole with XAUTOCLAIM;
    'new'     the next entries no consumer has read: at most ARGV[3], and never crossing a
              partition boundary (a multiple of ARGV[5] ms), so each object lies in one partition.
  Every batch is remembered in KEYS[2] as `firstId -> "lastId count"` until it is acknowledged:
  that is how 'own' and 'claimed' re-form exactly the batch first read, which is uploaded again
  under the same name with the same bytes.

  KEYS[1] shard log stream     KEYS[2] shard mirror-batches hash
  ARGV[1] consumer group       ARGV[2] consumer name        ARGV[3] most entries in a batch
  ARGV[4] idle time (ms) after which another consumer's batch is claimed
  ARGV[5] partition length (ms)

  Returns { mode, entries } with entries as XRANGE answers them ({ id, { field, value, ... } }),
  or { 'none' } when there is nothing to mirror. Writes no log entries.
]]
-- @include streamIds
-- @include mirrorGroup

local group, consumer = ARGV[1], ARGV[2]
local most = tonumber(ARGV[3])

local function batchSize(firstId)
  local record = redis.call('HGET', KEYS[2], firstId)
  if record then
    return tonumber(string.match(record, ' (%d+)$'))
  end
  return most
end

local own = redis.call('XPENDING', KEYS[1], group, '-', '+', 1, consumer)
if #own > 0 then
  local read = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', batchSize(own[1][1]), 'STREAMS', KEYS[1], '0')
  return { 'own', read[1][2] }
end

local stale = redis.call('XPENDING', KEYS[1], group, 'IDLE', ARGV[4], '-', '+', 1)
if #stale > 0 then
  local firstId = stale[1][1]
  local claimed = redis.call('XAUTOCLAIM', KEYS[1], group, consumer, ARGV[4], firstId, 'COUNT', batchSize(firstId))
  return { 'claimed', claimed[2] }
end

local info = mirrorGroup(KEYS[1], group)
if not info then
  return { 'none' }
end
local peek = redis.call('XRANGE', KEYS[1], '(' .. info['last-delivered-id'], '+', 'COUNT', most)
if #peek == 0 then
  return { 'none' }
end
local partition = tonumber(ARGV[5])
local firstMs = tonumber((idParts(peek[1][1])))
local boundary = (math.floor(firstMs / partition) + 1) * partition
local count = 0
for _, entry in ipairs(peek) do
  if tonumber((idParts(entry[1]))) >= boundary then
    break
  end
  count = count + 1
end
local read = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count, 'STREAMS', KEYS[1], '>')
local entries = read[1][2]
redis.call('HSET', KEYS[2], entries[1][1], entries[#entries][1] .. ' ' .. #entries)
return { 'new', entries }
