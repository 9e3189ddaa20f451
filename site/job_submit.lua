--[[
slurmplan job_submit.lua (Slurm 22.05, JobSubmitPlugins=lua). Runs under lua 5.1 (what Debian's slurmctld
links) and 5.3 (the test driver): no math.tointeger, no goto, no integer division.

What it does, at submit time only:
  1. collects plan hints from the SPANK plugin's options (job_desc.spank_job_env holds
     _SLURM_SPANK_OPTION_slurmplan_plan_<option>=<value>) and from a `--comment "slurmplan:..."`;
  2. validates them with the SAME grammar as slurmplan/formats.py (documented there; the keys, limits,
     canonical order and error texts below mirror it, and tests/integration/test_hint_parity.py fuzzes both);
  3. refuses a malformed hint (slurm.ERROR) with a user message naming the key, the value and what is allowed;
  4. refuses hints naming a GPU type this site's slurmplan cannot price (the list below, filled in by
     `slurmplan site install`; an empty list checks nothing); any model name is accepted: a model slurmplan
     does not know is scheduled from its measured throughput or a default (slurmplan/perf/unknown.py);
  5. makes a managed job's typed GPU request movable: `--gres=gpu:a100:4` becomes `gpu:4` plus
     `--constraint=a100` (when the job has no constraint), and `asked=a100:4` in the hints records what the
     user asked for. Slurm 22.05 cannot change the type of a pending typed request, so a typed job would be
     pinned to its type; the type is now a preference the daemon may change. A user who needs the type says
     `types=a100` (then the request is left typed, and the daemon never moves it elsewhere);
  6. writes the canonical hints into job_desc.admin_comment (users cannot set that field themselves), and
  7. holds managed jobs (priority 0) so that the slurmplan daemon decides before Slurm starts them.
Jobs without hints are left alone; unmanaged jobs (no hints, or managed=no) are never rewritten.

The grammar functions live in the global table `slurmplan_hints` so that a plain lua5.3 driver can load this
file (with a stub `slurm` table) and call them outside slurmctld.
--]]

local H = {}
slurmplan_hints = H

H.PREFIX = "slurmplan:"
H.KEYS = {
  "model", "gpus", "min", "max", "types", "class", "workers", "batch", "seq", "stack", "steps", "deadline", "managed",
  "asked", "nodes",
}
local INT_KEYS = {
  gpus = true, min = true, max = true, workers = true, batch = true, seq = true, steps = true, nodes = true,
}
local KNOWN = {}
for _, k in ipairs(H.KEYS) do KNOWN[k] = true end

local ALLOWED = {
  int = "an integer from 1 to 999999999 (digits only)",
  model = "a name of 1-64 characters from A-Z a-z 0-9 . _ / - starting with a letter or digit",
  types = "a comma-separated list of GPU types like a100,h100 (each 1-32 of a-z 0-9 _ -, no repeats)",
  deadline = "a UTC time YYYY-MM-DDTHH:MM[:SS][Z] between 1970 and 9999",
  class = "guaranteed or best-effort",
  bool = "yes or no",
  asked = "a typed GPU request TYPE:N like a100:4 (TYPE 1-32 of a-z 0-9 _ -, N an integer from 1 to 999999999)",
  stack = "one of megatron, deepspeed, ddp, fsdp",
}
-- The frameworks a job may name (slurmplan/formats.py STACKS).
local STACKS = { megatron = true, deepspeed = true, ddp = true, fsdp = true }

-- An error is a table {field=, value=, allowed=}; H.message renders it like Python's ValidationError.
local function err(field, value, allowed)
  return { field = field, value = tostring(value), allowed = allowed }
end

-- User text in a message is made printable: control characters and bytes >= 0x7f become '?', so a hint cannot
-- forge lines or terminal escapes in slurmctld's log or the user's terminal (issue 24 item 11).
function H.printable(s)
  return (tostring(s):gsub("[%c\127-\255]", "?"))
end

function H.message(e)
  return string.format("hints: invalid %s %q: %s", H.printable(e.field), H.printable(e.value), e.allowed)
end

-- Only spaces and tabs are blanks (Python strips the same two characters).
local function strip(s)
  return (s:gsub("^[ \t]+", ""):gsub("[ \t]+$", ""))
end

local function split(s, sep)
  local out, start = {}, 1
  while true do
    local i = s:find(sep, start, true)
    if not i then
      out[#out + 1] = s:sub(start)
      return out
    end
    out[#out + 1] = s:sub(start, i - 1)
    start = i + #sep
  end
end

local function parse_int(key, v)
  if not v:match("^[0-9]+$") or #v > 9 or tonumber(v) < 1 then return nil, err(key, v, ALLOWED.int) end
  return math.floor(tonumber(v)) -- an integer-valued number in lua 5.1 (slurmctld's) and 5.3
end

local function parse_model(key, v)
  if #v < 1 or #v > 64 or not v:match("^[A-Za-z0-9][A-Za-z0-9._/%-]*$") then
    return nil, err(key, v, ALLOWED.model)
  end
  return v
end

local function parse_types(key, v)
  if v:find("[\128-\255]") then return nil, err(key, v, ALLOWED.types) end
  local names, seen = {}, {}
  for _, part in ipairs(split(v, ",")) do
    local name = strip(part):lower()
    if #name < 1 or #name > 32 or not name:match("^[a-z0-9][a-z0-9_%-]*$") or seen[name] then
      return nil, err(key, v, ALLOWED.types)
    end
    seen[name] = true
    names[#names + 1] = name
  end
  return names
end

local function days_in_month(y, m)
  local days = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }
  if m == 2 and ((y % 4 == 0 and y % 100 ~= 0) or y % 400 == 0) then return 29 end
  return days[m]
end

local function parse_deadline(key, v)
  local y, mo, d, h, mi, rest = v:match("^(%d%d%d%d)%-(%d%d)%-(%d%d)T(%d%d):(%d%d)(.*)$")
  local s = "00"
  if rest and rest ~= "" and rest ~= "Z" then s = rest:match("^:(%d%d)Z?$") end
  if not y or not s then return nil, err(key, v, ALLOWED.deadline) end
  y, mo, d, h, mi, s = tonumber(y), tonumber(mo), tonumber(d), tonumber(h), tonumber(mi), tonumber(s)
  if y < 1970 or mo < 1 or mo > 12 or d < 1 or d > days_in_month(y, mo) or h > 23 or mi > 59 or s > 59 then
    return nil, err(key, v, ALLOWED.deadline)
  end
  local text = string.format("%04d-%02d-%02dT%02d:%02d", y, mo, d, h, mi)
  if s ~= 0 then text = text .. string.format(":%02d", s) end
  return text
end

local function parse_asked(key, v)
  local t, n = v:match("^([A-Za-z0-9][A-Za-z0-9_%-]*):([0-9]+)$")
  if not t or #t > 32 or #n > 9 or tonumber(n) < 1 then return nil, err(key, v, ALLOWED.asked) end
  return t:lower() .. ":" .. string.format("%d", tonumber(n))
end

local function parse_value(key, v)
  if INT_KEYS[key] then return parse_int(key, v) end
  if key == "asked" then return parse_asked(key, v) end
  if key == "model" then return parse_model(key, v) end
  if key == "types" then return parse_types(key, v) end
  if key == "deadline" then return parse_deadline(key, v) end
  if key == "stack" then
    if STACKS[v] then return v end
    return nil, err(key, v, ALLOWED.stack)
  end
  if key == "class" then
    if v == "guaranteed" or v == "best-effort" then return v end
    return nil, err(key, v, ALLOWED.class)
  end
  if v == "yes" or v == "no" then return v end -- managed
  return nil, err(key, v, ALLOWED.bool)
end

-- The cross-field rules, in the same order as Python's _check_consistent.
local function check_consistent(h)
  if h.min and h.max and h.min > h.max then return err("min", h.min, "at most max=" .. h.max) end
  if h.gpus and h.min and h.gpus < h.min then return err("gpus", h.gpus, "at least min=" .. h.min) end
  if h.gpus and h.max and h.gpus > h.max then return err("gpus", h.gpus, "at most max=" .. h.max) end
  if h.workers then
    if h.gpus and h.workers < h.gpus then return err("workers", h.workers, "at least gpus=" .. h.gpus) end
    if h.max and h.workers < h.max then return err("workers", h.workers, "at least max=" .. h.max) end
  end
  return nil
end

-- Parse hint text into a table keyed by grammar key; returns hints or nil, error.
function H.parse(text)
  local stripped = strip(text)
  if stripped:sub(1, #H.PREFIX) ~= H.PREFIX then
    return nil, err("prefix", text, "text starting with '" .. H.PREFIX .. "'")
  end
  local h = {}
  for _, segment in ipairs(split(stripped:sub(#H.PREFIX + 1), ";")) do
    if strip(segment) ~= "" then
      local eq = segment:find("=", 1, true)
      local key = strip(eq and segment:sub(1, eq - 1) or segment)
      local value = eq and strip(segment:sub(eq + 1)) or ""
      if not KNOWN[key] then return nil, err("key", key, "one of " .. table.concat(H.KEYS, ", ")) end
      if not eq then return nil, err(key, strip(segment), key .. "=VALUE") end
      if h[key] ~= nil then return nil, err(key, value, "given once only") end
      local parsed, e = parse_value(key, value)
      if e then return nil, e end
      h[key] = parsed
    end
  end
  local e = check_consistent(h)
  if e then return nil, e end
  return h
end

-- The canonical text: keys in H.KEYS order, defaults (class=best-effort, managed=yes) left out.
function H.format(h)
  local parts = {}
  for _, key in ipairs(H.KEYS) do
    local v = h[key]
    if key == "types" and v then v = table.concat(v, ",") end
    if (key == "class" and v == "best-effort") or (key == "managed" and v == "yes") then v = nil end
    if type(v) == "number" then v = string.format("%d", v) end
    if v ~= nil then parts[#parts + 1] = key .. "=" .. v end
  end
  return H.PREFIX .. table.concat(parts, ";")
end

-- Canonical text of hint text, or nil, error.
function H.canonical(text)
  local h, e = H.parse(text)
  if not h then return nil, e end
  return H.format(h)
end

-- The hints part of an admin comment or --comment (before " || "), or nil when it holds none.
function H.hints_part(text)
  local s = strip(text or "")
  local bar = s:find("||", 1, true)
  if bar then
    local left = strip(s:sub(1, bar - 1))
    -- someone else's text before `||` (`project=x || owner=y`) is not hints (issue 24 item 6)
    if left == "" or left:sub(1, #H.PREFIX) ~= H.PREFIX then return nil end
    return left
  end
  if s:sub(1, #H.PREFIX) ~= H.PREFIX then return nil end
  local rest = strip(s:sub(#H.PREFIX + 1))
  if rest == "" or rest:find("=", 1, true) then return s end
  return nil
end

-- The decision part of an admin comment (after " || "), or "".
function H.decision_part(text)
  local s = strip(text or "")
  local bar = s:find("||", 1, true)
  if bar then return strip(s:sub(bar + 2)) end
  return ""
end

-- What a managed job submitted held by its user (`sbatch -H`) shows as its decision: slurmplan's daemon never
-- lifts that hold (slurmplan/formats.py USER_HOLD_MARK); its user may.
H.USER_HOLD_MARK = "slurmplan! held by its user"

-- ------------------------------------------------------------------------------------------ SPANK options

-- sbatch --plan-<option>=VALUE reaches slurmctld as _SLURM_SPANK_OPTION_slurmplan_plan_<option>=VALUE.
local OPTION_PREFIX = "_SLURM_SPANK_OPTION_slurmplan_plan_"
local OPTION_KEYS = {
  model = "model", gpu_types = "types", class = "class", workers = "workers", batch = "batch",
  steps = "steps", deadline = "deadline", seq = "seq", managed = "managed", stack = "stack",
}

-- slurmctld hands spank_job_env over as a table indexed from 0; take every entry, in index order.
local function env_entries(env)
  if type(env) == "string" then return split(env, "\n") end
  if type(env) ~= "table" then return {} end
  local keys, out = {}, {}
  for k, v in pairs(env) do
    if type(k) == "number" and type(v) == "string" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  for _, k in ipairs(keys) do out[#out + 1] = env[k] end
  return out
end

-- Hint pairs from the SPANK environment, or nil, error for a malformed --plan-gpus.
function H.pairs_from_spank_env(env)
  local pairs_ = {}
  for _, entry in ipairs(env_entries(env)) do
    local name, value = entry:match("^([^=]+)=(.*)$")
    if name and name:sub(1, #OPTION_PREFIX) == OPTION_PREFIX then
      local option = name:sub(#OPTION_PREFIX + 1)
      if option == "gpus" then
        local lo, hi = value:match("^[ \t]*([^:]*):([^:]*)[ \t]*$")
        if lo then
          pairs_[#pairs_ + 1] = { "min", lo }
          pairs_[#pairs_ + 1] = { "max", hi }
        elseif value:find(":", 1, true) then
          return nil, err("--plan-gpus", value, "N or MIN:MAX with integers from 1 to 999999999")
        else
          pairs_[#pairs_ + 1] = { "gpus", value }
        end
      elseif OPTION_KEYS[option] then
        pairs_[#pairs_ + 1] = { OPTION_KEYS[option], value }
      end
    end
  end
  return pairs_
end

-- The canonical hints of a submission (SPANK options win over --comment keys), nil when it has none,
-- or nil, error when they are malformed.
function H.from_submission(spank_env, comment)
  local spank_pairs, e = H.pairs_from_spank_env(spank_env)
  if e then return nil, e end
  local comment_hints = H.hints_part(comment)
  if #spank_pairs == 0 and not comment_hints then return nil end
  local given, segments = {}, {}
  for _, p in ipairs(spank_pairs) do
    given[p[1]] = true
    segments[#segments + 1] = p[1] .. "=" .. p[2]
  end
  if comment_hints then
    local body = comment_hints:sub(1, #H.PREFIX) == H.PREFIX and comment_hints:sub(#H.PREFIX + 1) or nil
    if not body then return H.canonical(comment_hints) end -- reports the missing prefix
    for _, segment in ipairs(split(body, ";")) do
      local key = strip(segment:match("^[^=]*") or "")
      if not given[key] then segments[#segments + 1] = segment end
    end
  end
  local h, perr = H.parse(H.PREFIX .. table.concat(segments, ";"))
  if not h then return nil, perr end
  return H.format(h), nil, h
end

-- ------------------------------------------------------------------------------------------ managed partitions

-- Jobs in these partitions are managed even without hints (the daemon's managed_partitions setting);
-- `slurmplan site install` fills the list from slurmplan.yaml. Keep it on one line.
H.MANAGED_PARTITIONS = {}

-- The partitions a job asked for; the default partition when it named none.
function H.job_partitions(partition, part_list)
  if partition and partition ~= "" then return split(partition, ",") end
  for name, part in pairs(part_list or {}) do
    if part.flag_default == 1 then return { part.name or name } end
  end
  return {}
end

function H.in_managed_partition(partitions)
  for _, p in ipairs(partitions) do
    for _, m in ipairs(H.MANAGED_PARTITIONS) do
      if strip(p) == m then return true end
    end
  end
  return false
end

-- ------------------------------------------------------------------------------------------ known names

-- The models and GPU types the daemon can price; `slurmplan site install` fills both from the performance
-- catalogs (names and aliases, normalised). Only the types are checked (an empty list checks nothing); the
-- models are for reference. Keep each on one line.
H.KNOWN_MODELS = {}
H.KNOWN_TYPES = {}

local function listed(list, name)
  for _, known in ipairs(list) do
    if known == name then return true end
  end
  return false
end

-- An error for a GPU type the site does not know, or nil. Models are not checked: one slurmplan does not know
-- (a researcher's own network) is scheduled from its reports or a default (slurmplan/perf/unknown.py).
function H.check_known(h)
  for _, t in ipairs(h.types or {}) do
    if #H.KNOWN_TYPES > 0 and not listed(H.KNOWN_TYPES, t) then
      return err("types", t, "GPU types among " .. table.concat(H.KNOWN_TYPES, ", "))
    end
  end
  return nil
end

-- ------------------------------------------------------------------------------------------ typed requests

local function is_set(v)
  return v ~= nil and v ~= "" and v ~= slurm.NO_VAL
end

-- A typed GPU request in tres_per_node ("gres:gpu:a100:4", "gpu:a100:4", "gres/gpu:a100:4", possibly beside
-- other GRES) as untyped text plus the type and count; nil when there is no typed GPU entry.
-- Left as asked (nil) when there is nothing to move: no typed GPU entry, a count of 0 (`gpu:a100:0` asks for no
-- GPU), or several GPU entries (`gpu:a100:2,gpu:h100:2`: rewriting one would mix typed and untyped; issue 24 item 7).
function H.untype(tres)
  if type(tres) ~= "string" or tres == "" then return nil end
  local out, gpu_type, count, gpus = {}, nil, nil, 0
  for _, entry in ipairs(split(tres, ",")) do
    local prefix, t, n = entry:match("^(.-gpu):([A-Za-z0-9][A-Za-z0-9_%-]*):([0-9]+)$")
    local is_gpu = prefix == "gpu" or prefix == "gres:gpu" or prefix == "gres/gpu"
    if entry:match("^gpu") or entry:match("^gres[:/]gpu") then gpus = gpus + 1 end
    if is_gpu and not gpu_type then
      gpu_type, count = t:lower(), tonumber(n)
      out[#out + 1] = prefix .. ":" .. n
    else
      out[#out + 1] = entry
    end
  end
  if not gpu_type or count < 1 or gpus > 1 then return nil end
  return table.concat(out, ","), gpu_type, count
end

-- A constraint the GPU type can be ANDed onto (`ib` -> `ib&a100`): features joined by `&` only. Anything with
-- `|`, `[`, `*` or parentheses is left alone, and then so is the typed request (the type must not be lost).
function H.and_constraint(features, gpu_type)
  if not is_set(features) then return gpu_type end
  if not features:match("^[A-Za-z0-9_%-%.&]+$") then return nil end
  return features .. "&" .. gpu_type
end

-- Rewrite a managed job's typed request; returns the hints (with asked= added) to record.
local function make_movable(job_desc, h)
  local untyped, gpu_type, count = H.untype(job_desc.tres_per_node)
  if not untyped then return h end
  if h.types and #h.types == 1 and h.types[1] == gpu_type then return h end -- needs that type: left as asked
  local features = H.and_constraint(job_desc.features, gpu_type)
  if not features then return h end -- a constraint the type cannot be joined to: the request stays typed
  job_desc.tres_per_node = untyped
  job_desc.features = features
  if not h.asked then h.asked = gpu_type .. ":" .. string.format("%d", count) end
  return h
end

-- Record the job's own node limit (--nodes=N or -N MIN-MAX: MAX) as nodes=, so the daemon never spreads it wider.
local function record_nodes(job_desc, h)
  local most = tonumber(job_desc.max_nodes)
  if not h.nodes and most and most >= 1 and most <= 999999999 then h.nodes = math.floor(most) end
  return h
end

-- ------------------------------------------------------------------------------------------ trust (issue 24)

-- Who may use the hints that change a job's standing against others' (the daemon's guaranteed_accounts,
-- guaranteed_qos, unmanaged_*, steps_*, deadline_* settings; `slurmplan site install` fills this in). A rule that
-- is absent allows everybody; a rule allows a job whose account or QOS is listed. Keep it on one line.
H.TRUST = {}
local TRUST_HINT = { guaranteed = "class=guaranteed", unmanaged = "managed=no", steps = "steps=", deadline = "deadline=" }
local TRUST_ORDER = { "guaranteed", "unmanaged", "steps", "deadline" }

local function rule_used(rule, h)
  if rule == "guaranteed" then return h.class == "guaranteed" end
  if rule == "unmanaged" then return h.managed == "no" end
  return h[rule] ~= nil
end

-- The refusal (same text as slurmplan/control/trust.py) for the first rule the hints break, or nil.
function H.check_trust(h, account, qos)
  account, qos = account or "", qos or ""
  for _, rule in ipairs(TRUST_ORDER) do
    local r = H.TRUST[rule]
    if r and rule_used(rule, h) and not (listed(r.accounts or {}, account) or listed(r.qos or {}, qos)) then
      return string.format(
        "hints: %s is not allowed for account '%s' / QOS '%s': the site allows it for %s_accounts [%s] or %s_qos [%s]",
        TRUST_HINT[rule], H.printable(account ~= "" and account or "(none)"), H.printable(qos ~= "" and qos or "(none)"),
        rule, table.concat(r.accounts or {}, ", "), rule, table.concat(r.qos or {}, ", "))
    end
  end
  return nil
end

-- ------------------------------------------------------------------------------------------ fail-open (issue 16)

-- The daemon's heartbeat file, rewritten at the end of every tick it completes; `slurmplan site install` fills
-- it in from the daemon's config. nil: never fail open (always hold managed jobs). Keep it on one line.
H.HEARTBEAT_FILE = nil
-- The uid the daemon runs as when it is not root (its service user); it may release held managed jobs.
H.DAEMON_UID = nil

-- True when slurmplan is down: the heartbeat is missing, garbled, or older than the limit written in it. Then a
-- managed job is not held, so plain Slurm runs it as submitted; the daemon takes it over when it is back.
function H.daemon_down(path, now)
  if not path then return false end
  local f = io.open(path, "r")
  if not f then return true end
  local text = f:read("*a") or ""
  f:close()
  local t = tonumber(string.match(text, "time=([%d%.]+)"))
  local limit = tonumber(string.match(text, "stale_after_s=([%d%.]+)"))
  if not t or not limit then return true end
  -- Same boot of this host: the age on the monotonic clock (/proc/uptime), so a wall-clock step neither fails
  -- open early nor keeps a dead daemon's heartbeat fresh (issue 24 item 12).
  local boot, up = string.match(text, "boot=([%w%-]+)"), tonumber(string.match(text, "uptime=([%d%.]+)"))
  if not now and boot and up then
    local bf, uf = io.open("/proc/sys/kernel/random/boot_id", "r"), io.open("/proc/uptime", "r")
    local this_boot = bf and (bf:read("*l") or "")
    local this_up = uf and tonumber(string.match(uf:read("*l") or "", "^([%d%.]+)"))
    if bf then bf:close() end
    if uf then uf:close() end
    if this_boot == boot and this_up then return this_up - up > limit end
  end
  return (now or os.time()) - t > limit
end

-- ------------------------------------------------------------------------------------------ Slurm entry points

function slurm_job_submit(job_desc, part_list, submit_uid)
  local text, e, h = H.from_submission(job_desc.spank_job_env, job_desc.comment)
  if e then
    local msg = "slurmplan: " .. H.message(e)
    slurm.log_info("slurmplan: refused job from uid %d: %s", submit_uid, msg)
    slurm.log_user("%s", msg)
    return slurm.ERROR
  end
  if not text then
    if not H.in_managed_partition(H.job_partitions(job_desc.partition, part_list)) then return slurm.SUCCESS end
    text, h = H.PREFIX, {}
  end
  local unknown = H.check_known(h)
  if unknown then
    local msg = "slurmplan: " .. H.message(unknown)
    slurm.log_info("slurmplan: refused job from uid %d: %s", submit_uid, msg)
    slurm.log_user("%s", msg)
    return slurm.ERROR
  end
  local untrusted = H.check_trust(h, job_desc.account, job_desc.qos)
  if untrusted then
    local msg = "slurmplan: " .. untrusted
    slurm.log_info("slurmplan: refused job from uid %d: %s", submit_uid, msg)
    slurm.log_user("%s", msg)
    return slurm.ERROR
  end
  if h.managed ~= "no" and H.daemon_down(H.HEARTBEAT_FILE) then
    -- fail open: plain Slurm runs the job as submitted (typed request untouched)
    slurm.log_info("slurmplan: daemon down (stale heartbeat %s): job from uid %d not held", H.HEARTBEAT_FILE, submit_uid)
  elseif h.managed ~= "no" and is_set(job_desc.tres_per_job) and tostring(job_desc.tres_per_job):find("gpu", 1, true) then
    -- GPUs per job (`--gpus=a100:4`): the daemon resizes per node, and Slurm would keep both (issue 24 item 7)
    local msg = "slurmplan: hints: invalid --gpus " .. string.format("%q", H.printable(job_desc.tres_per_job))
      .. ": a managed job asks for GPUs per node, --gres=gpu[:TYPE]:N (or --gpus-per-node)"
    slurm.log_info("slurmplan: refused job from uid %d: %s", submit_uid, msg)
    slurm.log_user("%s", msg)
    return slurm.ERROR
  elseif h.managed ~= "no" then
    local user_held = job_desc.priority == 0 -- `sbatch -H`: the user's own hold, which the daemon must not lift
    h = record_nodes(job_desc, make_movable(job_desc, h))
    text = H.format(h)
    if user_held then text = text .. " || " .. H.USER_HOLD_MARK end
    job_desc.priority = 0 -- held until the slurmplan daemon releases it
  end
  job_desc.admin_comment = text
  slurm.log_debug("slurmplan: job from uid %d hints %s", submit_uid, text)
  return slurm.SUCCESS
end

-- A managed job is held (priority 0) for the daemon. Slurm records that as a user hold, which its owner could
-- lift with `scontrol release`; refuse that for anyone but root (the daemon runs as root), so Slurm never
-- starts a managed job before slurmplan decided where and how.
-- A change that does not touch the priority (TimeLimit, say) comes with priority NO_VAL (issue 24 item 10). A user
-- may lift a hold that is their own (USER_HOLD_MARK, or held after the daemon released the job: slurmplan/formats.py
-- foreign_hold); the daemon takes the job over on its next tick.
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  local prio = job_desc.priority
  if modify_uid == 0 or modify_uid == H.DAEMON_UID or prio == nil or prio == slurm.NO_VAL or prio == 0
    or job_rec.priority ~= 0 then return slurm.SUCCESS end
  local decision = H.decision_part(job_rec.admin_comment)
  if decision:sub(1, #H.USER_HOLD_MARK) == H.USER_HOLD_MARK then return slurm.SUCCESS end
  -- released by the daemon (its decision says run), held since by its user: that hold is the user's to lift
  local after = decision:sub(#H.PREFIX + 1):match("^%s*(.*)$") or ""
  if decision:sub(1, #H.PREFIX) == H.PREFIX and after ~= "" and after:sub(1, 4) ~= "held" then return slurm.SUCCESS end
  local hints_text = H.hints_part(job_rec.admin_comment)
  local h = hints_text and H.parse(hints_text)
  if h and h.managed ~= "no" then
    slurm.log_user("%s", "slurmplan: job " .. tostring(job_rec.job_id) .. " is held for the slurmplan scheduler, "
      .. "which releases it when it has decided its GPUs and plan; `slurmplan explain "
      .. tostring(job_rec.job_id) .. "` says why it waits")
    return slurm.ERROR
  end
  return slurm.SUCCESS
end

return slurm.SUCCESS
