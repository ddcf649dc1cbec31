--[[
  Lets go of a finished notice once the archive holds its record (src/retention/retire.ts): deletes
  its hash and events list, drops it from the shard's content-expiry, retire, notices and address indexes, and
  counts it in the shard's `retired` metric. Only when the notice still has the entries the
  record names. Its /v1/stats counters stay as they are. A notice an earlier version created
  is still in the shard's `created` index: if the stats backfill has not counted it yet (no
  `statsHour`), its stats member takes the place of its ID (same score), for the backfill to count.

  KEYS[1] notice hash   KEYS[2] events list   KEYS[3] shard created zset
  KEYS[4] shard content-expiry zset   KEYS[5] shard retire zset   KEYS[6] shard metrics hash
  KEYS[7] shard notices zset (the notices list's index, src/store/notice-index.ts)
  KEYS[8] shard addresses zset (the address lookup's index, src/store/address-index.ts)
  ARGV[1] noticeId   ARGV[2] number of entries the record names   ARGV[3] stats member
  ARGV[4] the notice's members of the address index, space-separated ('' none)

  Returns 1 when let go; 0 when the notice has more entries now (the record is out of date);
  -1 when Redis no longer holds the notice.
]]
local function dropAddresses()
  for member in string.gmatch(ARGV[4], '%S+') do
    redis.call('ZREM', KEYS[8], member)
  end
end

if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[5], ARGV[1])
  redis.call('ZREM', KEYS[7], ARGV[1])
  dropAddresses()
  return -1
end
if redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[2]) then
  return 0
end
local created = redis.call('ZSCORE', KEYS[3], ARGV[1])
local counted = created and redis.call('HEXISTS', KEYS[1], 'statsHour') == 1
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('ZREM', KEYS[7], ARGV[1])
dropAddresses()
if created then
  redis.call('ZREM', KEYS[3], ARGV[1])
  if not counted then
    redis.call('ZADD', KEYS[3], created, ARGV[3])
  end
end
redis.call('HINCRBY', KEYS[6], 'retired', 1)
return 1
