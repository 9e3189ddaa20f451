-- Loads site/job_submit.lua outside slurmctld (with a stub `slurm` table) and runs its hint grammar on
-- hex-encoded lines from stdin: prints "OK <canonical>" or "ERR <field>" per line. Used by test_hint_parity.py.
slurm = { SUCCESS = 0, ERROR = -1, log_info = function() end, log_user = function() end,
          log_debug = function() end }
dofile(arg[1])
local H = slurmplan_hints
for line in io.lines() do
  local text = line:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)
  local canonical, e = H.canonical(text)
  if canonical then io.write("OK ", canonical, "\n") else io.write("ERR ", e.field, "\n") end
end
