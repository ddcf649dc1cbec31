-- Adds the caller's metric increments to the shard's metrics hash, in the same step as the
-- transition they describe, so counters never disagree with the log. increments: { field, n, ... }
local function countMetrics(metricsKey, increments)
  for i = 1, #increments, 2 do
    redis.call('HINCRBY', metricsKey, increments[i], increments[i + 1])
  end
end
