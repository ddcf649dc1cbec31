--[[
  One guarded step of a notice: checks its current state (and optional field guards), changes
  state and fields, and appends the decision-log entries that explain the step, all at once.
  Every state change after creation goes through this script; each step of the engine
  (src/notice/engine.ts) names its allowed states, new state and entries. A step after which
  nothing more is sent also brings the content's expiry back to its TTL (ARGV[8]).

  KEYS[1] notice hash   KEYS[2] events list   KEYS[3] shard log stream   KEYS[4] shard due zset
  KEYS[5] shard metrics hash   KEYS[6] shard stats hash (the /v1/stats counters, includes/countStats.lua)
  KEYS[7] content string   KEYS[8] shard content-expiry zset (touched only when ARGV[8] is set)
  ARGV[1] noticeId
  ARGV[2] now (ms)
  ARGV[3] at (ISO)
  ARGV[4] allowed current states, comma-separated ('*' = any)
  ARGV[5] new state ('' = unchanged)
  ARGV[6] due: '' keep, 'remove', or a score in ms
  ARGV[7] reached: a field holding a time in ms that must be <= now (a deadline never fires early);
          '' for none
  ARGV[8] content TTL (ms) when this step ends what Herald may send for the notice (its entries
          include `notice.completed` or `sms.unconfirmed`), else '': the content is then kept
          only until createdAt + TTL, or deleted at once when that time has passed, and its
          content-expiry score moves to that time (now at the latest), so that the purge sweep
          records `content.purged` then. Content already purged (`contentPurgedAt`) is left alone.
  ARGV[9] onwards, lists each led by its length, read in order (no JSON to decode):
    E, then E pairs field, value: eq guards: the field must hold exactly this value ('' = the
       field must be absent)
    S, then S pairs field, value: fields to set
    U, then U fields to delete
    N, then N entries, each its length L and then L items: type, field, value, ... (values
       JSON-encoded by the caller, includes/appendEntries.lua)
    M, then M pairs field, n: metric increments (src/store/metrics.ts)
  then, optionally, '1': the reply carries the notice hash as the step left it (a step that goes
  on with the notice, such as the SMS sent right after its decision, needs no read of its own)

  The /v1/stats counters of the notice's creation hour follow its state and counted fields, for a
  notice that has a `statsHour` (one created by an earlier version gets it from the backfill,
  src/notice/stats.ts, which counts it as it is then).

  Returns { 1, state }                    done; state is the new state
          { 1, state, hash }              the same, with the hash as HGETALL gives it when asked for
          { -1 }                          no such notice
          { -2, currentState }            the notice is in another state
          { -3, field, currentValue }     a guard failed
]]
-- @include appendEntries
-- @include setDue
-- @include countStats

-- The state, the log's last seq, the stats hour, every guarded field, the content's fields when
-- the step ends the sending, and the old values of the counted fields this step changes, in one
-- read. The lists after ARGV[8] are read by position.
local pos = 9
local eqAt, eqCount = pos + 1, tonumber(ARGV[pos])
pos = eqAt + 2 * eqCount
local setAt, setCount = pos + 1, tonumber(ARGV[pos])
pos = setAt + 2 * setCount
local unsetAt, unsetCount = pos + 1, tonumber(ARGV[pos])
pos = unsetAt + unsetCount
local entriesAt = pos

local wanted = { 'state', 'seq', 'statsHour' }
for i = 0, eqCount - 1 do
  wanted[#wanted + 1] = ARGV[eqAt + 2 * i]
end
local reached = ARGV[7]
local reachedAt = 0
if reached ~= '' then
  wanted[#wanted + 1] = reached
  reachedAt = #wanted
end
local contentTtl = ARGV[8]
local contentAt = 0
if contentTtl ~= '' then
  wanted[#wanted + 1] = 'createdAt'
  wanted[#wanted + 1] = 'contentPurgedAt'
  contentAt = #wanted - 1
end
local after = {}
for i = unsetAt, unsetAt + unsetCount - 1 do
  after[ARGV[i]] = ''
end
for i = setAt, setAt + 2 * setCount - 1, 2 do
  after[ARGV[i]] = ARGV[i + 1]
end
local countedAt = {}
for _, field in ipairs(STATS_FIELDS) do
  if after[field] ~= nil then
    wanted[#wanted + 1] = field
    countedAt[field] = #wanted
  end
end
local current = redis.call('HMGET', KEYS[1], unpack(wanted))

local state = current[1]
if not state then
  return { -1 }
end
local lastSeq = tonumber(current[2]) or 0

local allowed = ARGV[4]
if allowed ~= '*' then
  local ok = false
  for s in string.gmatch(allowed, '[^,]+') do
    if s == state then
      ok = true
      break
    end
  end
  if not ok then
    return { -2, state }
  end
end

for i = 0, eqCount - 1 do
  local actual = current[i + 4] or ''
  if actual ~= ARGV[eqAt + 2 * i + 1] then
    return { -3, ARGV[eqAt + 2 * i], actual }
  end
end
if reachedAt > 0 then
  local at = tonumber(current[reachedAt])
  if at == nil or at > tonumber(ARGV[2]) then
    return { -3, reached, tostring(at) }
  end
end

-- The entries: where each starts in ARGV, and how long it is.
local entries, metricsAt = entryStarts(entriesAt)
local entryCount = #entries

local newState = ARGV[5]
local before = { state = state }
local flat = {}
for i = setAt, setAt + 2 * setCount - 1 do
  flat[#flat + 1] = ARGV[i]
end
if newState ~= '' then
  after.state = newState
  flat[#flat + 1] = 'state'
  flat[#flat + 1] = newState
  state = newState
end
if entryCount > 0 then
  flat[#flat + 1] = 'seq'
  flat[#flat + 1] = lastSeq + entryCount
end
if #flat > 0 then
  redis.call('HSET', KEYS[1], unpack(flat))
end
if unsetCount > 0 then
  redis.call('HDEL', KEYS[1], unpack(ARGV, unsetAt, unsetAt + unsetCount - 1))
end

appendEntries(KEYS[2], KEYS[3], ARGV[1], ARGV[3], entries, lastSeq)
setDue(KEYS[4], ARGV[1], ARGV[6])
local metricCount = tonumber(ARGV[metricsAt])
for i = metricsAt + 1, metricsAt + 2 * metricCount - 1, 2 do
  redis.call('HINCRBY', KEYS[5], ARGV[i], ARGV[i + 1])
end
local replyWithHash = ARGV[metricsAt + 2 * metricCount + 1] == '1'
local hour = current[3]
if hour then
  for field, i in pairs(countedAt) do
    before[field] = current[i]
  end
  countStats(KEYS[6], hour, before, after)
end
-- Nothing more is sent: the content stays no longer than its TTL. The expiry is relative (PEXPIRE,
-- not PEXPIREAT) because createdAt and now come from Herald's clock, which need not be Redis's.
if contentAt > 0 and current[contentAt] and not current[contentAt + 1] then
  local now = tonumber(ARGV[2])
  local expiresAt = math.max(tonumber(current[contentAt]) + tonumber(contentTtl), now)
  if expiresAt > now then
    redis.call('PEXPIRE', KEYS[7], string.format('%d', expiresAt - now))
  else
    redis.call('DEL', KEYS[7])
  end
  redis.call('ZADD', KEYS[8], string.format('%d', expiresAt), ARGV[1])
end
if replyWithHash then
  return { 1, state, redis.call('HGETALL', KEYS[1]) }
end
return { 1, state }
