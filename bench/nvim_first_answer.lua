-- Driven by bench/nvim_bench.py: real Neovim, the plugin's documented setup plus a root marker, one workspace.
-- Prints one JSON line: ms from Neovim start to the first search answer, then save -> searchable times.
local started = (vim.uv or vim.loop).hrtime()
local function ms()
  return ((vim.uv or vim.loop).hrtime() - started) / 1e6
end
local plugin_dir = os.getenv('CODELOUPE_PLUGIN_DIR')
local root = os.getenv('CODELOUPE_BENCH_ROOT')
local saves = tonumber(os.getenv('CODELOUPE_BENCH_SAVES') or '0')
vim.opt.runtimepath:prepend(plugin_dir)
vim.cmd('filetype on')
vim.cmd.runtime('plugin/codeloupe.lua')
require('codeloupe').setup({ cmd = vim.json.decode(os.getenv('CODELOUPE_BENCH_CMD')) })

local python_host = os.getenv('CODELOUPE_BENCH_PYTHON_HOST') or ''
if python_host ~= '' then
  vim.g.python3_host_prog = python_host -- the provider configured: no probe of every python3 on PATH
end

local out = {}
local editing = ms()
vim.cmd.edit(vim.fn.fnameescape(vim.fs.joinpath(root, 'os.py')))
-- Neovim's own share of the start: reading os.py runs the python filetype plugin, whose python3 provider probe
-- blocks the loop (~0.9 s quiet); the plugin starts the server before it.
out.edit_ms = ms() - editing
-- Given at once, as a user would: the plugin queues it until the server attaches, the server answers it
-- once the workspace has an index (the one on disk when warm, the first index when cold).
vim.cmd('Codeloupe search! walk a directory tree')
local progress = require('codeloupe.progress')
local function answered()
  -- Also notes when the plugin first holds indexing progress to show (statusline / command line).
  if out.first_progress_ms == nil and next(progress.state) ~= nil then
    out.first_progress_ms = ms()
  end
  return #vim.fn.getqflist() > 0
end
if not vim.wait(600000, answered, 5) then
  io.stdout:write(vim.json.encode({ error = 'no answer' }) .. '\n')
  os.exit(1)
end
out.first_answer_ms = ms()
local client = vim.lsp.get_clients({ name = 'codeloupe' })[1]
local again = ms()
client:request_sync('codeloupe/search', { query = 'read a configuration file' }, 60000)
out.second_answer_ms = ms() - again

out.save_ms = {}
for k = 1, saves do
  local token = ('zqx%dbenchtoken%d'):format(k, math.random(1e6))
  local rel = ('codeloupe_bench_%d.py'):format(k)
  vim.cmd.edit(vim.fn.fnameescape(vim.fs.joinpath(root, rel)))
  vim.api.nvim_buf_set_lines(0, 0, -1, false, { ('def %s():'):format(token), '    return 1' })
  local saved = ms()
  vim.cmd('silent write')
  local found = false
  while not found and ms() - saved < 60000 do
    local response = client:request_sync('codeloupe/search', { query = token }, 10000)
    local core = response and response.result and response.result.core or {}
    found = core[1] ~= nil and core[1].path == rel
    if not found then vim.wait(5) end
  end
  out.save_ms[#out.save_ms + 1] = found and (ms() - saved) or -1
end
-- A session outlives its first answer: let the server finish its refresh (and save what a restart reads)
-- before quitting, as an editor left open would.
vim.wait(600000, function()
  local state = require('codeloupe.progress').state[client.id]
  return state ~= nil and not state.active
end, 50)
vim.wait(tonumber(os.getenv('CODELOUPE_BENCH_LINGER_MS') or '12000'))
io.stdout:write(vim.json.encode(out) .. '\n')
vim.cmd('qall!')
