-- wrk script for bench/push.py: send every pre-signed request of a file exactly once, then stop.
--
--   wrk -t T -c C -d <upper bound> --timeout 30s -s bench/deliveries.lua URL -- FILE T [RATE]
--
-- FILE has one request per line: "<path>\t<signature>\t<body>" (an Infrai push), or
-- "<path>\t<Name: value>\x1f<Name: value>...\t<body>" (any header set: bench/push_formats.py;
-- Content-Type defaults to application/json). Request i goes to thread
-- i % T. A connection whose thread has nothing left to send parks on a long delay, and the
-- thread stops once every request it sent has been answered, so exactly the file's requests
-- are measured (no wrap-around, no filler requests). RATE (requests/s over all threads, 0 or
-- absent = closed loop) paces the sends for latency at a fixed offered load.
-- The last thing printed is one line "WRK_RESULT <json>" that bench/push.py parses.

local ffi = require("ffi")
ffi.cdef([[
  typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
  int clock_gettime(int clock_id, bench_timespec *tp);
]])
local clock_ts = ffi.new("bench_timespec")

local function now_seconds()
  ffi.C.clock_gettime(1, clock_ts) -- CLOCK_MONOTONIC
  return tonumber(clock_ts.tv_sec) + tonumber(clock_ts.tv_nsec) / 1e9
end

-- main state: every thread, to collect their tallies in done()
local threads = {}

function setup(thread)
  thread:set("thread_index", #threads)
  table.insert(threads, thread)
end

-- The headers of one request line's second field (see the top of this file).
local function headers_of(field)
  local headers = { ["Content-Type"] = "application/json" }
  if not field:find(": ", 1, true) then
    headers["X-Infrai-Signature"] = field
    return headers
  end
  for pair in field:gmatch("[^\31]+") do
    local name, value = pair:match("^([^:]+): (.*)$")
    headers[name] = value
  end
  return headers
end

function init(args)
  local thread_count = tonumber(args[2])
  local rate = tonumber(args[3] or "0")
  reqs, total, scheduled, sent, received = {}, 0, 0, 0, 0
  statuses, outcomes = {}, {}
  interval = rate > 0 and thread_count / rate or 0
  started, first_sent_at, last_received_at = nil, 0, 0
  -- wrk calls request() once on thread 0 to check the script; that call sends nothing
  verifying = thread_index == 0
  local i = 0
  for line in io.lines(args[1]) do
    if i % thread_count == thread_index then
      local path, headers, body = line:match("^([^\t]*)\t([^\t]*)\t(.*)$")
      total = total + 1
      reqs[total] = wrk.format("POST", path, headers_of(headers), body)
    end
    i = i + 1
  end
end

function delay()
  -- Reserve the next request here: several connections may ask before any of them sends.
  if scheduled >= total then
    return 3600000 -- park: nothing left for this connection to send
  end
  scheduled = scheduled + 1
  if interval == 0 then
    return 0
  end
  local now = now_seconds()
  started = started or now
  local wait = started + (scheduled - 1) * interval - now
  return wait > 0 and math.floor(wait * 1000) or 0
end

function request()
  if verifying then
    verifying = false
    return reqs[1]
  end
  sent = sent + 1
  if sent == 1 then
    first_sent_at = now_seconds()
  end
  return reqs[sent]
end

function response(status, headers, body)
  received = received + 1
  local key = tostring(status)
  statuses[key] = (statuses[key] or 0) + 1
  local outcome = body and body:match('"outcome":"([%w_]+)"') or "none"
  outcomes[outcome] = (outcomes[outcome] or 0) + 1
  if received >= total then
    last_received_at = now_seconds()
    wrk.thread:stop()
    -- wrk itself waits for its -d duration; bench/push.py sends SIGINT once every thread is done
    io.stderr:write("BENCH_THREAD_DONE\n")
    io.stderr:flush()
  end
end

local function json_map(map)
  local parts = {}
  for k, v in pairs(map) do
    table.insert(parts, string.format('"%s": %d', k, v))
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function merge(into, map)
  for k, v in pairs(map or {}) do
    into[k] = (into[k] or 0) + v
  end
end

function done(summary, latency, requests)
  local all_statuses, all_outcomes = {}, {}
  local planned, sent_total, received_total = 0, 0, 0
  local first, last = math.huge, 0
  for _, thread in ipairs(threads) do
    merge(all_statuses, thread:get("statuses"))
    merge(all_outcomes, thread:get("outcomes"))
    planned = planned + thread:get("total")
    sent_total = sent_total + thread:get("sent")
    received_total = received_total + thread:get("received")
    local thread_first = thread:get("first_sent_at")
    if thread_first > 0 then
      first = math.min(first, thread_first)
    end
    last = math.max(last, thread:get("last_received_at"))
  end
  local elapsed = last > first and last - first or 0
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"elapsed_s": %.6f, "duration_us": %d, "requests": %d, "planned": %d, '
      .. '"sent": %d, "received": %d, '
      .. '"p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d, "mean_us": %.1f, '
      .. '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, '
      .. '"statuses": %s, "outcomes": %s}\n',
    elapsed, summary.duration, summary.requests, planned, sent_total, received_total,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean, e.connect, e.read, e.write, e.status, e.timeout,
    json_map(all_statuses), json_map(all_outcomes)
  ))
end
