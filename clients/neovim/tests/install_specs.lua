-- The plugin manager specs of clients/neovim/README.md, run as their manager runs them on a checkout of the repository
-- (CODELOUPE_TEST_CHECKOUT, holding clients/neovim): lazy.nvim's `build` then `config` with the plugin's `dir`, or
-- packer's `run` with its `install_path` after adding the `rtp` subdirectory. Each manager makes help tags for the
-- repository root's doc/ only, so `:help codeloupe` works only if the spec makes the plugin's own.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))

local manager = os.getenv('CODELOUPE_TEST_INSTALL')
local checkout = os.getenv('CODELOUPE_TEST_CHECKOUT')
local readme = table.concat(vim.fn.readfile(vim.fs.joinpath(H.plugin_dir, 'README.md')), '\n')

--- The first ```lua block after `heading` in the README.
---@param heading string
---@return string
local function block_after(heading)
  local at = readme:find(heading, 1, true)
  H.check(at, 'the README has no ' .. heading)
  return readme:match('```lua\n(.-)\n```', at)
end

vim.notify = function(msg, level)
  H.notifications[#H.notifications + 1] = { msg = tostring(msg), level = level or vim.log.levels.INFO }
end

if manager == 'lazy' then
  local spec = assert(load('return ' .. block_after('lazy.nvim, from the repository:')))()
  local plugin = { dir = checkout, name = 'codeloupe' }
  if spec.build then
    spec.build(plugin) -- after the clone (and each update)
  end
  spec.config(plugin, {})
elseif manager == 'packer' then
  local spec
  _G.use = function(given)
    spec = given
  end
  assert(load(block_after('packer.nvim:')))()
  _G.use = nil
  local install_path = checkout
  vim.opt.runtimepath:append(vim.fs.joinpath(install_path, spec.rtp))
  vim.cmd.runtime('plugin/codeloupe.lua')
  for _, hook in ipairs(type(spec.run) == 'table' and spec.run or { spec.run }) do
    hook({ install_path = install_path }, nil)
  end
  spec.config()
else
  H.fail('CODELOUPE_TEST_INSTALL is ' .. tostring(manager))
end

H.equal(vim.fn.exists(':Codeloupe'), 2, ':Codeloupe after the ' .. manager .. ' spec')
H.check(require('codeloupe.config').configured, 'setup() ran')
for _, topic in ipairs({ 'codeloupe', 'codeloupe-options', ':Codeloupe-search' }) do
  local ok, err = pcall(vim.cmd.help, topic)
  H.check(ok, (':help %s after the %s spec: %s'):format(topic, manager, tostring(err)))
  H.equal(vim.fn.expand('%:t'), 'codeloupe.txt', ':help ' .. topic .. ' opens')
end
