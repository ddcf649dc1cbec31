--[[
  Stores a new notice, its content and its first decision-log entries in one step, or finds
  the notice an earlier request with the same idempotency key created.

  KEYS[1] notice hash          KEYS[2] content string     KEYS[3] events list
  KEYS[4] shard log stream     KEYS[5] shard due zset     KEYS[6] idempotency hash
  KEYS[7] shard metrics hash   KEYS[8] shard stats hash (the /v1/stats counters, includes/countStats.lua)
  KEYS[9] shard notices zset (every notice Redis holds, score 0, by ID = by creation: src/store/notice-index.ts)
  KEYS[10] shard addresses zset (the address lookup's index: src/store/address-index.ts)
  ARGV[1] noticeId             ARGV[2] at (ISO)           ARGV[3] content TTL (ms)
  ARGV[4] idempotency TTL (ms) ARGV[5] request body hash, '' when no idempotency key
  ARGV[6] content JSON (stored as is)   ARGV[7] due score (ms)
  ARGV[8] createdAt (ms): its hour is stored as `statsHour`, the notice's counters' bucket (a
          `statsHour` among the fields, `<tenant>/<hour>` for a tenant's notice, is kept instead)
  ARGV[9] the address index's members of the notice, space-separated (`<hmac>:<noticeId>`; '' none)
  ARGV[10] onwards, lists each led by its length, read in order (no JSON to decode):
    F, then F pairs field, value: the notice's fields
    N, then N entries, each its length L and then L items: type, field, value, ... (values
       JSON-encoded by the caller, includes/appendEntries.lua)
    M, then M pairs field, n: metric increments (src/store/metrics.ts)

  Returns { 1 } when created;
          { 0, existingNoticeId, existingBodyHash } when the idempotency key was used before;
          { -4 } when the notice ID exists already.
  Log entries: those passed (notice.accepted, policy.checked).
]]
-- @include appendEntries
-- @include setDue
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

local fieldCount = tonumber(ARGV[10])
local fields = {}
local after = {}
for i = 11, 10 + 2 * fieldCount, 2 do
  fields[#fields + 1] = ARGV[i]
  fields[#fields + 1] = ARGV[i + 1]
  after[ARGV[i]] = ARGV[i + 1]
end
-- The entries: where each starts in ARGV, and how long it is.
local entries, metricsAt = entryStarts(11 + 2 * fieldCount)
local entryCount = #entries
local hour = after.statsHour
fields[#fields + 1] = 'seq'
fields[#fields + 1] = entryCount
if hour == nil then
  hour = tostring(math.floor(tonumber(ARGV[8]) / 3600000))
  fields[#fields + 1] = 'statsHour'
  fields[#fields + 1] = hour
end
redis.call('HSET', KEYS[1], unpack(fields))

redis.call('SET', KEYS[2], ARGV[6], 'PX', ARGV[3])

if bodyHash ~= '' then
  redis.call('HSET', KEYS[6], 'noticeId', noticeId, 'bodyHash', bodyHash)
  redis.call('PEXPIRE', KEYS[6], ARGV[4])
end

appendEntries(KEYS[3], KEYS[4], noticeId, ARGV[2], entries, 0)
setDue(KEYS[5], noticeId, ARGV[7])
redis.call('ZADD', KEYS[9], 0, noticeId)
for member in string.gmatch(ARGV[9], '%S+') do
  redis.call('ZADD', KEYS[10], 0, member)
end
for i = metricsAt + 1, metricsAt + 2 * tonumber(ARGV[metricsAt]) - 1, 2 do
  redis.call('HINCRBY', KEYS[7], ARGV[i], ARGV[i + 1])
end
countStats(KEYS[8], hour, {}, after)
return { 1 }
