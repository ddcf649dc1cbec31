-- Turns a JSON object of field → value into the flat { field, value, ... } list HSET takes.
local function flatten(json)
  local flat = {}
  for k, v in pairs(cjson.decode(json)) do
    flat[#flat + 1] = k
    flat[#flat + 1] = v
  end
  return flat
end
