--[[
  Says where the log mirror's next batch of one shard's decision log lies, without reading the
  entries (the caller reads them with XRANGE: entries that pass through a script cost Redis
  about three times as much). The mirror's consumer group is only the shard's cursor: its
  last-delivered ID is the newest entry handed out, moved by takeMirrorBatch-3.lua, and no entry
  enters its pending list. What a batch needs until the archive confirms it is its record in
  KEYS[2], `firstId -> "lastId count prev holder since"`, which is also its lease: the consumer
  named `holder` took it at `since` (ms). In order of preference:
    'own'     the oldest batch this consumer holds (its upload failed);
    'claimed' the oldest batch whose holder took it at least ARGV[3] ms ago (it died or hangs),
              or one an earlier version left unacknowledged (a record without a holder);
    'new'     the entries after the cursor, which the caller reads and takes
              (takeMirrorBatch-3.lua).
  'own' and 'claimed' name exactly the batch first handed out (its record), which is uploaded
  again under the same name with the same bytes and the same seal; taking a batch renews its
  lease (`holder`, `since`). A batch an earlier version left pending in the group is
  acknowledged there when it is claimed: from then on its record alone holds it.

  The archive chain (src/archive/seal.ts): each batch's `prev` is the `firstId_lastId` of the
  batch handed out before it in this shard ('-' for the first), fixed when the batch is first
  handed out, so the chain runs in stream order whoever uploads which batch when. KEYS[3]
  holds `last` (the range of the last batch handed out, '-' before any), `genesis` (the first
  entry the chain covers: of its first batch, or the first entry not handed out yet when it
  began without one), `since` (ARGV[4] when the chain began), `v1through` (the last entry of the
  last batch a version sealing with v1 handed out, '-' when none did), `v2since` (ARGV[4] when
  this version took the chain over) and `tip` (written by ackMirrorBatch-2.lua). The log mirror
  copies all but `last` and `tip` into the archive as the shard's anchor (src/archive/anchor.ts).
  The first run after an upgrade from a version without the chain begins it with the batches
  that version handed out and left unacknowledged, oldest first; the first run on a chain a
  version sealing with v1 began records where its v1 seals end.

  KEYS[1] shard log stream     KEYS[2] shard mirror-batches hash     KEYS[3] shard archive-chain hash
  ARGV[1] consumer group       ARGV[2] consumer name
  ARGV[3] time (ms) after which another consumer's batch is claimed
  ARGV[4] now (ms)

  Returns { 'own' | 'claimed', firstId, lastId, count, prev, tip } or { 'new', cursor, tip },
  with tip as KEYS[3] holds it ('' when none) and cursor the newest entry handed out ('0-0'
  before any). Writes no log entries.
]]
-- @include streamIds
-- @include mirrorGroup

local group, consumer = ARGV[1], ARGV[2]
local now = tonumber(ARGV[4])

-- The group exists from the first call on (a new shard's starts at the stream's beginning, so
-- nothing written before is skipped).
local info = mirrorGroup(KEYS[1], group)
if not info then
  redis.call('XGROUP', 'CREATE', KEYS[1], group, '0', 'MKSTREAM')
  info = { ['last-delivered-id'] = '0-0' }
end

-- A record as this version writes it, or one an earlier version wrote ("lastId count [prev]",
-- no holder: its entries are pending in the group).
local function parseRecord(record)
  local lastId, count, prev, holder, since = string.match(record, '^(%S+) (%d+) (%S*) (%S+) (%d+)$')
  if lastId then
    return lastId, tonumber(count), prev, holder, tonumber(since)
  end
  lastId, count, prev = string.match(record, '^(%S+) (%d+) ?(%S*)$')
  return lastId, tonumber(count), prev, nil, nil
end

local function writeRecord(firstId, lastId, count, prev)
  redis.call('HSET', KEYS[2], firstId, lastId .. ' ' .. count .. ' ' .. prev .. ' ' .. consumer .. ' ' .. ARGV[4])
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
  local genesis = #batches > 0 and batches[1][1] or idAfter(info['last-delivered-id'])
  redis.call('HSET', KEYS[3], 'last', prev, 'since', ARGV[4], 'genesis', genesis, 'v1through', '-', 'v2since', ARGV[4])
elseif redis.call('HEXISTS', KEYS[3], 'v2since') == 0 then
  -- A chain a version sealing with v1 began: its seals end with the last batch it handed out.
  local last = redis.call('HGET', KEYS[3], 'last')
  redis.call('HSET', KEYS[3], 'v1through', string.match(last, '_(%S+)$') or '-', 'v2since', ARGV[4])
  if redis.call('HEXISTS', KEYS[3], 'genesis') == 0 then
    redis.call('HSET', KEYS[3], 'genesis', idAfter(info['last-delivered-id']))
  end
end

local function tip()
  return redis.call('HGET', KEYS[3], 'tip') or ''
end

-- Batches handed out and not confirmed: usually none, one per consumer at most.
local records = redis.call('HGETALL', KEYS[2])
if #records > 0 then
  local reclaimMs = tonumber(ARGV[3])
  local own, stale
  for i = 1, #records, 2 do
    local firstId = records[i]
    local _, _, _, holder, since = parseRecord(records[i + 1])
    if holder == consumer then
      if not own or idLess(firstId, own) then
        own = firstId
      end
    elseif not holder or now - since >= reclaimMs then
      if not stale or idLess(firstId, stale) then
        stale = firstId
      end
    end
  end
  local firstId = own or stale
  if firstId then
    local lastId, count, prev, holder = parseRecord(redis.call('HGET', KEYS[2], firstId))
    if not holder then
      -- An earlier version's batch: its record holds it from now on, not the pending list.
      local ids = {}
      for _, p in ipairs(redis.call('XPENDING', KEYS[1], group, firstId, lastId, count)) do
        ids[#ids + 1] = p[1]
        if #ids == 500 then
          redis.call('XACK', KEYS[1], group, unpack(ids))
          ids = {}
        end
      end
      if #ids > 0 then
        redis.call('XACK', KEYS[1], group, unpack(ids))
      end
    end
    writeRecord(firstId, lastId, count, prev)
    return { own and 'own' or 'claimed', firstId, lastId, count, prev, tip() }
  end
end

return { 'new', info['last-delivered-id'], tip() }
