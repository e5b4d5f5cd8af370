"""The Lua scripts of flow control (docs/architecture.md, "Flow control"),
run by `runtime/transport/throttle.py`: each is atomic in Redis, and the
throttle sends them as EVALSHA on its pipelines. The rate windows' scripts
are the `limits` library's own."""

# Take one slot in each set, or none. KEYS: the slot sets; ARGV: now, expiry,
# member, ttl, then each set's cap. {0, 0}: taken (or held already); else
# {i, when the first slot of set i frees}.
TAKE = """
local now, expiry, member = tonumber(ARGV[1]), ARGV[2], ARGV[3]
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  if not redis.call('ZSCORE', KEYS[i], member) then
    if redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[4 + i]) then
      local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
      return {i, first[2]}
    end
  end
end
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], expiry, member)
  redis.call('EXPIRE', KEYS[i], ARGV[4])
end
return {0, '0'}
"""
# Free slots of each set now. KEYS: the sets; ARGV: now, then each cap.
FREE = """
local out = {}
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', ARGV[1])
  out[i] = tonumber(ARGV[1 + i]) - redis.call('ZCARD', KEYS[i])
end
return out
"""
# Which of a key's reads are parked already. KEYS: the parked set; ARGV: members.
PARKED = """
local out = {}
for i = 1, #ARGV do out[i] = redis.call('SISMEMBER', KEYS[1], ARGV[i]) end
return out
"""
# A key's reads: each goes in flight while fewer than the cap are, else it is
# parked; one its batch has sent already (a stale view of the batch) neither.
# KEYS: in flight, parked list, parked set, the batch's sent marks, the set of
# submitters parking; ARGV: now, expiry, cap, ttl, the submitter, then member,
# call id and message triples (an empty message: ask for it rather than park).
# Returns a string: s (send), p (parked), x (sent already: left alone) or n
# (to park: its message is needed).
ADMIT_READS = """
local now, expiry, cap, ttl = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local out = {}
for i = 6, #ARGV, 3 do
  local member = ARGV[i]
  if redis.call('SISMEMBER', KEYS[3], member) == 1 then
    out[#out + 1] = 'p'
  elseif redis.call('HEXISTS', KEYS[4], ARGV[i + 1]) == 1 then
    out[#out + 1] = 'x'
  elseif redis.call('ZSCORE', KEYS[1], member) or redis.call('ZCARD', KEYS[1]) < cap then
    redis.call('ZADD', KEYS[1], expiry, member)
    out[#out + 1] = 's'
  elseif ARGV[i + 2] == '' then
    out[#out + 1] = 'n'
  else
    redis.call('RPUSH', KEYS[2], ARGV[i + 2])
    redis.call('SADD', KEYS[3], member)
    redis.call('SADD', KEYS[5], ARGV[5])  -- the submitter
    out[#out + 1] = 'p'
  end
end
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ttl) end
return table.concat(out)
"""
# A key's read ended (or never ran): its place goes to the reads parked
# next. KEYS: in flight, parked list, parked set; ARGV: now, expiry, cap,
# member. Returns the messages to send.
NEXT_READS = """
local now, expiry, cap = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
if ARGV[4] ~= '' then redis.call('ZREM', KEYS[1], ARGV[4]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local out = {}
while redis.call('ZCARD', KEYS[1]) < cap do
  local message = redis.call('LPOP', KEYS[2])
  if not message then break end
  local member = cjson.decode(message)['member']
  redis.call('SREM', KEYS[3], member)
  redis.call('ZADD', KEYS[1], expiry, member)
  out[#out + 1] = message
end
return out
"""
# Take back the hit of each window a call took before it found another limit
# full: the entry the `limits` library's acquire script pushed, the number
# converted to text as that script converts it. KEYS: the windows; ARGV: the
# timestamp the acquire was given.
UNHIT = """
for i = 1, #KEYS do redis.call('LREM', KEYS[i], 1, tonumber(ARGV[1])) end
return #KEYS
"""
