--[[
  One guarded step of a notice: checks its current state (and optional field guards), changes
  state and fields, and appends the decision-log entries that explain the step, all at once.
  Every state change after creation goes through this script; each step of the engine
  (src/notice/engine.ts) names its allowed states, new state and entries.

  KEYS[1] notice hash   KEYS[2] events list   KEYS[3] shard log stream   KEYS[4] shard due zset
  KEYS[5] shard metrics hash   KEYS[6] shard stats hash (the /v1/stats counters, includes/countStats.lua)
  ARGV[1] noticeId
  ARGV[2] now (ms)
  ARGV[3] at (ISO)
  ARGV[4] allowed current states, comma-separated ('*' = any)
  ARGV[5] new state ('' = unchanged)
  ARGV[6] guards JSON: { "eq": { field: value, ... }, "reached": field }
          eq: the field must hold exactly this value ('' = the field must be absent);
          reached: the field holds a time in ms that must be <= now (a deadline never fires early)
  ARGV[7] fields to set JSON: { field: value }
  ARGV[8] fields to delete JSON: [ field, ... ]
  ARGV[9] entries JSON: [ [ type, field, value, ... ], ... ]
  ARGV[10] due: '' keep, 'remove', or a score in ms
  ARGV[11] metric increments JSON: [ field, n, ... ] (src/store/metrics.ts)

  The /v1/stats counters of the notice's creation hour follow its state and counted fields, for a
  notice that has a `statsHour` (one created by an earlier version gets it from the backfill,
  src/notice/stats.ts, which counts it as it is then).

  Returns { 1, state }                    done; state is the new state
          { -1 }                          no such notice
          { -2, currentState }            the notice is in another state
          { -3, field, currentValue }     a guard failed
]]
-- @include appendEntries
-- @include setDue
-- @include countMetrics
-- @include countStats

-- The state, the log's last seq, the stats hour, every guarded field and the old values of the
-- counted fields this step changes, in one read.
local guards = cjson.decode(ARGV[6])
local set = cjson.decode(ARGV[7])
local unset = cjson.decode(ARGV[8])
local wanted = { 'state', 'seq', 'statsHour' }
local eqFields = {}
if guards.eq then
  for field in pairs(guards.eq) do
    eqFields[#eqFields + 1] = field
    wanted[#wanted + 1] = field
  end
end
local reachedAt = 0
if guards.reached then
  wanted[#wanted + 1] = guards.reached
  reachedAt = #wanted
end
local after = {}
for _, field in ipairs(unset) do
  after[field] = ''
end
for field, value in pairs(set) do
  after[field] = value
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

for i, field in ipairs(eqFields) do
  local actual = current[i + 3] or ''
  if actual ~= guards.eq[field] then
    return { -3, field, actual }
  end
end
if guards.reached then
  local at = tonumber(current[reachedAt])
  if at == nil or at > tonumber(ARGV[2]) then
    return { -3, guards.reached, tostring(at) }
  end
end

local newState = ARGV[5]
local before = { state = state }
local entries = cjson.decode(ARGV[9])
local flat = {}
for field, value in pairs(set) do
  flat[#flat + 1] = field
  flat[#flat + 1] = value
end
if newState ~= '' then
  after.state = newState
  flat[#flat + 1] = 'state'
  flat[#flat + 1] = newState
  state = newState
end
if #entries > 0 then
  flat[#flat + 1] = 'seq'
  flat[#flat + 1] = lastSeq + #entries
end
if #flat > 0 then
  redis.call('HSET', KEYS[1], unpack(flat))
end
if #unset > 0 then
  redis.call('HDEL', KEYS[1], unpack(unset))
end

appendEntries(KEYS[2], KEYS[3], ARGV[1], ARGV[3], entries, lastSeq)
setDue(KEYS[4], ARGV[1], ARGV[10])
countMetrics(KEYS[5], cjson.decode(ARGV[11]))
local hour = current[3]
if hour then
  for field, i in pairs(countedAt) do
    before[field] = current[i]
  end
  countStats(KEYS[6], hour, before, after)
end
return { 1, state }
