--[[
  Counts in the /v1/stats counters one member of a shard's `created` index, the index earlier
  versions kept of every notice (src/store/stats.ts, backfillStats): a notice still in Redis is
  counted as it is now and gets its `statsHour`, from then on kept by transition-8.lua; a retired
  notice's member (`<id> <state> <reason or -> <email checks> <sms checks> <email sent 0/1>
  <sms segments>`, parsed by the caller into ARGV) is counted and removed. Idempotent: a counted
  notice has a `statsHour`, a counted member is gone.

  KEYS[1] shard created zset   KEYS[2] the member's notice hash   KEYS[3] shard stats hash
  ARGV[1] member   ARGV[2] '1' when the member is a retired notice's, then:
  ARGV[3] state   ARGV[4] fallback reason ('' none)   ARGV[5] email checks   ARGV[6] sms checks
  ARGV[7] email sent ('1' or '')   ARGV[8] sms segments

  Returns 1 when counted now; 0 when counted before or no longer indexed; -1 when the member
  names a notice Redis no longer holds (nothing to count: it is dropped).
]]
-- @include countStats

local created = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not created then
  return 0
end
local hour = tostring(math.floor(tonumber(created) / 3600000))
if ARGV[2] == '1' then
  countStats(KEYS[3], hour, {}, {
    state = ARGV[3],
    fallbackReason = ARGV[4],
    emailChecksDone = ARGV[5],
    smsChecksDone = ARGV[6],
    emailProviderMessageId = ARGV[7],
    smsSegments = ARGV[8],
  })
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
local current = redis.call('HMGET', KEYS[2], 'state', 'statsHour', unpack(STATS_FIELDS))
if not current[1] then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return -1
end
if current[2] then
  return 0
end
local after = { state = current[1] }
for i, field in ipairs(STATS_FIELDS) do
  after[field] = current[i + 2] or ''
end
countStats(KEYS[3], hour, {}, after)
redis.call('HSET', KEYS[2], 'statsHour', hour)
return 1
