-- Appends decision-log entries for one notice: each goes to the shard's stream with the notice's
-- next `seq` (after `lastSeq`, the notice's `seq` before them, which the caller sets to
-- lastSeq + #starts in its own HSET), and the stream IDs are remembered in the notice's events
-- list with one RPUSH. The entries are the caller's ARGV, flat: `starts` holds, for each entry,
-- the ARGV index of its length L, followed by its L items (type, field1, value1, ...); values
-- arrive JSON-encoded from the caller, which is the only writer of entry fields.
local function appendEntries(eventsKey, logKey, noticeId, at, starts, lastSeq)
  if #starts == 0 then
    return
  end
  local ids = {}
  local seq = lastSeq
  for _, start in ipairs(starts) do
    seq = seq + 1
    local args = { logKey, '*', 'type', ARGV[start + 1], 'noticeId', noticeId, 'at', at, 'seq', tostring(seq) }
    for i = start + 2, start + tonumber(ARGV[start]) do
      args[#args + 1] = ARGV[i]
    end
    ids[#ids + 1] = redis.call('XADD', unpack(args))
  end
  redis.call('RPUSH', eventsKey, unpack(ids))
end

-- Where each flat entry starts in ARGV: the count of entries is at `at`, then each entry's
-- length L and its L items. Returns the starts, for appendEntries, and the index after the last.
local function entryStarts(at)
  local count = tonumber(ARGV[at])
  local pos = at + 1
  local starts = {}
  for e = 1, count do
    starts[e] = pos
    pos = pos + 1 + tonumber(ARGV[pos])
  end
  return starts, pos
end
