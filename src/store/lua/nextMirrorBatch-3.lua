--[[
  Hands the log mirror its next batch of one shard's decision log, read through the mirror's
  consumer group. In order of preference:
    'own'     the oldest batch this consumer read and has not acknowledged (its upload failed);
    'claimed' the oldest batch another consumer has held for at least ARGV[4] ms (it died or
              hangs), taken over whole with XAUTOCLAIM;
    'new'     the next entries no consumer has read: at most ARGV[3], and never crossing a
              partition boundary (a multiple of ARGV[5] ms), so each object lies in one partition.
  Every batch is remembered in KEYS[2] as `firstId -> "lastId count prev"` until it is
  acknowledged: that is how 'own' and 'claimed' re-form exactly the batch first read, which is
  uploaded again under the same name with the same bytes and the same seal.

  The archive chain (src/archive/seal.ts): each batch's `prev` is the `firstId_lastId` of the
  batch handed out before it in this shard ('-' for the first), fixed here when the batch is
  first handed out, so the chain runs in stream order whoever uploads which batch when. KEYS[3]
  holds `last` (the range of the last batch handed out, '-' before any), `genesis` (the first
  entry the chain covers: of its first batch, or the first entry not handed out yet when it
  began without one), `since` (ARGV[6] when the chain began), `v1through` (the last entry of the
  last batch a version sealing with v1 handed out, '-' when none did), `v2since` (ARGV[6] when
  this version took the chain over) and `tip` (written by ackMirrorBatch-3.lua). The log mirror
  copies all but `last` and `tip` into the archive as the shard's anchor (src/archive/anchor.ts).
  The first run after an upgrade from a version without the chain begins it with the batches
  that version handed out and left unacknowledged, oldest first; the first run on a chain a
  version sealing with v1 began records where its v1 seals end.

  KEYS[1] shard log stream     KEYS[2] shard mirror-batches hash     KEYS[3] shard archive-chain hash
  ARGV[1] consumer group       ARGV[2] consumer name        ARGV[3] most entries in a batch
  ARGV[4] idle time (ms) after which another consumer's batch is claimed
  ARGV[5] partition length (ms)    ARGV[6] now (ms)

  Returns { mode, entries, prev, tip, more } with entries as XRANGE answers them
  ({ id, { field, value, ... } }), tip as KEYS[3] holds it ('' when none), and more '0' when a
  'new' batch took every entry no consumer had read ('1' otherwise: there may be more to hand
  out), or { 'none' } when there is nothing to mirror. Writes no log entries.
]]
-- @include streamIds
-- @include mirrorGroup

local group, consumer = ARGV[1], ARGV[2]
local most = tonumber(ARGV[3])

-- The first entry of the shard no consumer has been handed yet: where a chain begun now starts.
local function firstUnread()
  local info = mirrorGroup(KEYS[1], group)
  return idAfter(info and info['last-delivered-id'] or '0-0')
end

local function parseRecord(record)
  local lastId, count, prev = string.match(record, '^(%S+) (%d+) ?(%S*)$')
  return lastId, tonumber(count), prev
end

if redis.call('HEXISTS', KEYS[3], 'last') == 0 then
  local fields = redis.call('HGETALL', KEYS[2])
  local batches = {}
  for i = 1, #fields, 2 do
    batches[#batches + 1] = { fields[i], fields[i + 1] }
  end
  table.sort(batches, function(a, b)
    return idLess(a[1], b[1])
  end)
  local prev = '-'
  for _, batch in ipairs(batches) do
    local lastId, count = parseRecord(batch[2])
    redis.call('HSET', KEYS[2], batch[1], lastId .. ' ' .. count .. ' ' .. prev)
    prev = batch[1] .. '_' .. lastId
  end
  local genesis = #batches > 0 and batches[1][1] or firstUnread()
  redis.call('HSET', KEYS[3], 'last', prev, 'since', ARGV[6], 'genesis', genesis, 'v1through', '-', 'v2since', ARGV[6])
elseif redis.call('HEXISTS', KEYS[3], 'v2since') == 0 then
  -- A chain a version sealing with v1 began: its seals end with the last batch it handed out.
  local last = redis.call('HGET', KEYS[3], 'last')
  redis.call('HSET', KEYS[3], 'v1through', string.match(last, '_(%S+)$') or '-', 'v2since', ARGV[6])
  if redis.call('HEXISTS', KEYS[3], 'genesis') == 0 then
    redis.call('HSET', KEYS[3], 'genesis', firstUnread())
  end
end

local function recorded(firstId)
  local record = redis.call('HGET', KEYS[2], firstId)
  if record then
    local _, count, prev = parseRecord(record)
    return count, prev
  end
  return most, ''
end

local function answer(mode, entries, prev, more)
  return { mode, entries, prev, redis.call('HGET', KEYS[3], 'tip') or '', more or '1' }
end

local own = redis.call('XPENDING', KEYS[1], group, '-', '+', 1, consumer)
if #own > 0 then
  local count, prev = recorded(own[1][1])
  local read = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count, 'STREAMS', KEYS[1], '0')
  return answer('own', read[1][2], prev)
end

local stale = redis.call('XPENDING', KEYS[1], group, 'IDLE', ARGV[4], '-', '+', 1)
if #stale > 0 then
  local firstId = stale[1][1]
  local count, prev = recorded(firstId)
  local claimed = redis.call('XAUTOCLAIM', KEYS[1], group, consumer, ARGV[4], firstId, 'COUNT', count)
  return answer('claimed', claimed[2], prev)
end

local info = mirrorGroup(KEYS[1], group)
if not info then
  return { 'none' }
end
-- The first entry no consumer has read sets the partition; when the newest entry of the stream
-- lies in the same partition, so does every unread one, and the batch is read at once. Only a
-- batch that may cross a partition boundary peeks at the entries first, to stop before it.
local first = redis.call('XRANGE', KEYS[1], '(' .. info['last-delivered-id'], '+', 'COUNT', 1)
if #first == 0 then
  return { 'none' }
end
local partition = tonumber(ARGV[5])
local firstMs = tonumber((idParts(first[1][1])))
local boundary = (math.floor(firstMs / partition) + 1) * partition
local count = most
local cut = false
local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if tonumber((idParts(newest[1][1]))) >= boundary then
  local peek = redis.call('XRANGE', KEYS[1], '(' .. info['last-delivered-id'], '+', 'COUNT', most)
  count = 0
  for _, entry in ipairs(peek) do
    if tonumber((idParts(entry[1]))) >= boundary then
      cut = true
      break
    end
    count = count + 1
  end
end
local read = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count, 'STREAMS', KEYS[1], '>')
local entries = read[1][2]
local firstId, lastId = entries[1][1], entries[#entries][1]
local prev = redis.call('HGET', KEYS[3], 'last')
redis.call('HSET', KEYS[2], firstId, lastId .. ' ' .. #entries .. ' ' .. prev)
redis.call('HSET', KEYS[3], 'last', firstId .. '_' .. lastId)
return answer('new', entries, prev, (cut or #entries >= most) and '1' or '0')
