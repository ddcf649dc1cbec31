--[[
  Stores a new notice, its content and its first decision-log entries in one step, or finds
  the notice an earlier request with the same idempotency key created.

  KEYS[1] notice hash          KEYS[2] content string     KEYS[3] events list
  KEYS[4] shard log stream     KEYS[5] shard due zset     KEYS[6] idempotency hash
  KEYS[7] shard metrics hash   KEYS[8] shard stats hash (the /v1/stats counters, includes/countStats.lua)
  KEYS[9] shard notices zset (every notice Redis holds, score 0, by ID = by creation: src/store/notice-index.ts)
  ARGV[1] noticeId             ARGV[2] at (ISO)           ARGV[3] content TTL (ms)
  ARGV[4] idempotency TTL (ms) ARGV[5] request body hash, '' when no idempotency key
  ARGV[6] notice fields JSON   ARGV[7] content JSON (stored as is)
  ARGV[8] entries JSON         ARGV[9] due score (ms)
  ARGV[10] metric increments JSON: [ field, n, ... ]
  ARGV[11] createdAt (ms): its hour is stored as `statsHour`, the notice's counters' bucket

  Returns { 1 } when created;
          { 0, existingNoticeId, existingBodyHash } when the idempotency key was used before;
          { -4 } when the notice ID exists already.
  Log entries: those in ARGV[8] (notice.accepted, policy.checked).
]]
-- @include appendEntries
-- @include flatten
-- @include setDue
-- @include countMetrics
-- @include countStats

local noticeId = ARGV[1]
local bodyHash = ARGV[5]
if bodyHash ~= '' then
  local existing = redis.call('HMGET', KEYS[6], 'noticeId', 'bodyHash')
  if existing[1] then
    return { 0, existing[1], existing[2] }
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return { -4 }
end

local entries = cjson.decode(ARGV[8])
local fields = flatten(ARGV[6])
local hour = tostring(math.floor(tonumber(ARGV[11]) / 3600000))
fields[#fields + 1] = 'seq'
fields[#fields + 1] = #entries
fields[#fields + 1] = 'statsHour'
fields[#fields + 1] = hour
redis.call('HSET', KEYS[1], unpack(fields))

redis.call('SET', KEYS[2], ARGV[7], 'PX', ARGV[3])

if bodyHash ~= '' then
  redis.call('HSET', KEYS[6], 'noticeId', noticeId, 'bodyHash', bodyHash)
  redis.call('PEXPIRE', KEYS[6], ARGV[4])
end

appendEntries(KEYS[3], KEYS[4], noticeId, ARGV[2], entries, 0)
setDue(KEYS[5], noticeId, ARGV[9])
redis.call('ZADD', KEYS[9], 0, noticeId)
countMetrics(KEYS[7], cjson.decode(ARGV[10]))
countStats(KEYS[8], hour, {}, cjson.decode(ARGV[6]))
return { 1 }
