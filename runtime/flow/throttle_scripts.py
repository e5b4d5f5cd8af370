"""The Lua scripts of flow control (docs/architecture.md, "Flow control"),
run by `runtime/flow/throttle.py`: each is atomic in Redis, and the
throttle sends them as EVALSHA on its pipelines, its own or one the state
makes anyway. The rate algorithm is the `limits` library's: its moving
window's Lua (the text it ships, pinned `limits>=5.8,<6` in pyproject.toml)
runs here as a function, so one script looks at every window and slot of a
call, or takes them all or none, in one command."""

from limits.storage import RedisStorage


def _function(name: str, chunk: bytes) -> str:
    """One of the library's scripts as a Lua function of (KEYS, ARGV)."""
    return f"local function {name}(KEYS, ARGV)\n{chunk.decode()}\nend\n"


WINDOW = _function("window", RedisStorage.SCRIPT_MOVING_WINDOW)  # `get_moving_window`'s
ACQUIRE = _function("acquire", RedisStorage.SCRIPT_ACQUIRE_MOVING_WINDOW)  # `acquire_entry`'s

# What each window and slot set has left. KEYS: the windows, then the slot
# sets; ARGV: now, the number of windows, each window's (limit, expiry, calls
# the look is for), then each set's cap. Per window: its oldest entry in the
# window ('' none) and its count (as `get_window_stats` reads them); per set:
# its free slots. A window whose list is short enough for every call the look
# is for gives its length as its count, unsearched: its entries may be older
# than the window, so the count may be too high, but never so high as to hold
# one of those calls back (and the worker's take counts exactly).
LOOK_BODY = """
local now, windows = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for i = 1, windows do
  local at = 3 * i
  local limit, expiry, calls = tonumber(ARGV[at]), tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
  local size = redis.call('LLEN', KEYS[i])
  -- The library searches the first `limit` places: those past the list's end are empty.
  local found = size + calls > limit and window({KEYS[i]}, {now - expiry, math.min(limit, size)})
  if found then
    out[#out + 1], out[#out + 2] = found[1], found[2]
  else
    out[#out + 1], out[#out + 2] = '', (size + calls > limit) and 0 or size
  end
end
for i = windows + 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  out[#out + 1] = tonumber(ARGV[2 + 2 * windows + i]) - redis.call('ZCARD', KEYS[i])
end
return out
"""
LOOK = WINDOW + LOOK_BODY
# A call's slot in each set and a hit of each window, all or none. KEYS: the
# slot sets, then the windows; ARGV: now, expiry, member, ttl, the number of
# sets, each set's cap, then each window's (limit, expiry). {0, 0}: taken (a
# slot held already is kept); else {i, when the first slot of set i frees}
# for a full set i, or {i, 0} for a full window (its hits taken back).
ENTER = (
    ACQUIRE
    + """
local now, expiry, member, ttl = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local sets = tonumber(ARGV[5])
for i = 1, sets do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  if not redis.call('ZSCORE', KEYS[i], member) then
    if redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[5 + i]) then
      local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
      return {i, first[2]}
    end
  end
end
local hit = {}
for i = sets + 1, #KEYS do
  local at = 6 + sets + 2 * (i - sets - 1)
  if not acquire({KEYS[i]}, {now, ARGV[at], ARGV[at + 1], 1}) then
    for _, key in ipairs(hit) do redis.call('LREM', key, 1, now) end
    return {i, '0'}
  end
  hit[#hit + 1] = KEYS[i]
end
for i = 1, sets do
  redis.call('ZADD', KEYS[i], expiry, member)
  redis.call('EXPIRE', KEYS[i], ttl)
end
return {0, '0'}
"""
)

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
# submitters parking; ARGV: now, expiry, cap, ttl, the submitter, whether to
# mark a read sent ('1': the sender's look, riding its marks), then member,
# call id and message triples (an empty message: ask for it rather than park).
# Returns a string: s (send; marked sent), p (parked), x (sent already: left
# alone) or n (to park: its message is needed).
ADMIT_READS = """
local now, expiry, cap, ttl = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
local mark = ARGV[6] == '1'
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local out = {}
for i = 7, #ARGV, 3 do
  local member = ARGV[i]
  if redis.call('SISMEMBER', KEYS[3], member) == 1 then
    out[#out + 1] = 'p'
  elseif redis.call('HEXISTS', KEYS[4], ARGV[i + 1]) == 1 then
    out[#out + 1] = 'x'
  elseif redis.call('ZSCORE', KEYS[1], member) or redis.call('ZCARD', KEYS[1]) < cap then
    redis.call('ZADD', KEYS[1], expiry, member)
    if mark then redis.call('HSET', KEYS[4], ARGV[i + 1], ARGV[1]) end
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
if mark then redis.call('EXPIRE', KEYS[4], ttl) end
return table.concat(out)
"""
# The sender's look and its fair share's admission in one command. KEYS:
# LOOK's, then ADMIT_READS's five; ARGV: the number of LOOK's keys and of its
# arguments, LOOK's arguments, then ADMIT_READS's. Returns LOOK's answer with
# ADMIT_READS's last.
LOOK_AND_ADMIT = (
    _function("look", (WINDOW + LOOK_BODY).encode())
    + _function("admit_reads", ADMIT_READS.encode())
    + """
local keys, args = tonumber(ARGV[1]), tonumber(ARGV[2])
local look_keys, look_args, admit_keys, admit_args = {}, {}, {}, {}
for i = 1, #KEYS do
  if i <= keys then look_keys[i] = KEYS[i] else admit_keys[i - keys] = KEYS[i] end
end
for i = 3, #ARGV do
  if i <= 2 + args then look_args[i - 2] = ARGV[i] else admit_args[i - 2 - args] = ARGV[i] end
end
local out = {}
if keys > 0 then out = look(look_keys, look_args) end
out[#out + 1] = admit_reads(admit_keys, admit_args)
return out
"""
)
# A key's read ended (or never ran): its place goes to the reads parked
# next. KEYS: in flight, parked list, parked set; ARGV: now, expiry, cap,
# member. Returns the messages to send.
NEXT_READS_FUNCTION = """
local function next_reads(KEYS, ARGV)
  local now, expiry, cap = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
  if ARGV[4] ~= '' then redis.call('ZREM', KEYS[1], ARGV[4]) end
  -- Nothing parked, nothing to send: the lapsed places go at the next admission.
  if redis.call('LLEN', KEYS[2]) == 0 then return {} end
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
end
"""
NEXT_READS = NEXT_READS_FUNCTION + "return next_reads(KEYS, ARGV)\n"
# A call's delivery is over: its slots freed and, with fair share, its place
# in flight given to the reads parked next. KEYS: the slot sets, then (fair
# share) NEXT_READS's three; ARGV: the member, the number of sets, then (fair
# share) NEXT_READS's first three. Returns the messages to send.
FINISH = (
    NEXT_READS_FUNCTION
    + """
local member, sets = ARGV[1], tonumber(ARGV[2])
for i = 1, sets do redis.call('ZREM', KEYS[i], member) end
if #KEYS == sets then return {} end
local share = {KEYS[sets + 1], KEYS[sets + 2], KEYS[sets + 3]}
return next_reads(share, {ARGV[3], ARGV[4], ARGV[5], member})
"""
)
