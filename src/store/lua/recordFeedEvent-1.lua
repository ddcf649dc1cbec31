--[[
  Records one event of a feed provider (SES, AWS SMS) on the message's latest observation. The
  feed delivers events at least once and in any order: an event replaces the observation only
  when it ranks higher, or ranks the same and is newer (a `Send` read after its `Delivery`
  leaves the delivery in place; a duplicate changes nothing). Engagement and suppression are
  flags that only accumulate.

  KEYS[1] the message's observation hash
  ARGV[1] rank (0: the event says nothing of the status)   ARGV[2] event time (ms)
  ARGV[3] normalized status   ARGV[4] provider status   ARGV[5] bounce type or ''
  ARGV[6] error code or ''    ARGV[7] '1' when the address is now suppressed, else ''
  ARGV[8] engagement signal or ''   ARGV[9] time to live (ms)

  Returns 1 when the status changed, else 0.
]]
local rank = tonumber(ARGV[1])
local at = tonumber(ARGV[2])
local current = redis.call('HMGET', KEYS[1], 'rank', 'at')
local currentRank = tonumber(current[1])
local currentAt = tonumber(current[2])
local changed = 0
if rank > 0 and (currentRank == nil or rank > currentRank or (rank == currentRank and at > currentAt)) then
  redis.call('HSET', KEYS[1], 'rank', rank, 'at', at, 'status', ARGV[3], 'providerStatus', ARGV[4])
  if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'bounceType', ARGV[5]) else redis.call('HDEL', KEYS[1], 'bounceType') end
  if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'errorCode', ARGV[6]) else redis.call('HDEL', KEYS[1], 'errorCode') end
  changed = 1
end
if ARGV[7] == '1' then redis.call('HSET', KEYS[1], 'suppressed', '1') end
if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'engagement:' .. ARGV[8], at) end
redis.call('HINCRBY', KEYS[1], 'events', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[9])
return changed
