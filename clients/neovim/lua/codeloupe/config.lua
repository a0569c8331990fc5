--- Options for the codeloupe plugin: defaults, validation, and the settings sent to the server.
local M = {}

---@class codeloupe.Options
---@field cmd string[]|fun(dispatchers: table): table  How to start the server (see |vim.lsp.ClientConfig|).
---@field settings table<string, any>  Server settings (snake_case or camelCase keys, see docs/protocol.md).
---@field root_markers (string|string[])[]  Workspace root markers, in priority order.
---@field filetypes string[]?  Restrict attaching to these filetypes; nil attaches to every file buffer.
---@field codelens boolean  Refresh code lenses on BufEnter/BufWritePost.
---@field progress boolean  Report indexing progress through |vim.notify()|.
---@field picker 'auto'|'telescope'|'select'  Where `:Codeloupe search` shows its results.
---@field search { limit: integer?, docs: ('code'|'docs'|'both')? }
---@field ask { docs: ('code'|'docs'|'both')?, agents: boolean? }
---@field layout 'split'|'vsplit'|'float'|'tab'  Where the ask and graph views open.
---@field locations 'quickfix'|'loclist'  Where code-lens locations go.
---@field capabilities table?  Extra client capabilities, merged over the plugin's.
---@field on_attach fun(client: vim.lsp.Client, bufnr: integer)?

---@type codeloupe.Options
M.defaults = {
  cmd = { 'codeloupe-lsp' },
  settings = {},
  -- A repository root wins over a nested package manifest, so a monorepo is one workspace.
  root_markers = {
    '.codeloupe.toml',
    '.git',
    {
      'pyproject.toml', 'setup.py', 'setup.cfg', 'package.json', 'go.mod', 'Cargo.toml', 'Gemfile',
      'composer.json', 'pom.xml', 'build.gradle', 'build.gradle.kts', 'mix.exs', 'deno.json', '.hg',
    },
  },
  filetypes = nil,
  codelens = true,
  progress = true,
  picker = 'auto',
  search = { limit = nil, docs = nil },
  ask = { docs = nil, agents = nil },
  layout = 'vsplit',
  locations = 'quickfix',
  capabilities = nil,
  on_attach = nil,
}

---@type codeloupe.Options
M.options = vim.deepcopy(M.defaults)

--- Whether setup() has run (health reports it).
M.configured = false

local enums = {
  picker = { auto = true, telescope = true, select = true },
  locations = { quickfix = true, loclist = true },
  layout = { split = true, vsplit = true, float = true, tab = true },
}

--- `embed_provider` -> `embedProvider`; camelCase keys pass through unchanged.
---@param key string
---@return string
function M.camel(key)
  return (key:gsub('[_%-](%l)', string.upper))
end

--- The settings table as the server receives it (initializationOptions and `settings.codeloupe`).
--- Always a JSON object: an empty Lua table would otherwise be encoded as the list `[]`.
---@param settings table<string, any>
---@return table<string, any>
function M.server_settings(settings)
  local out = vim.empty_dict()
  for key, value in pairs(settings or {}) do
    out[M.camel(key)] = value
  end
  return out
end

-- vim.validate changed signature in 0.11; this works the same on 0.10.
---@param name string
---@param value any
---@param kinds string[]
local function expect(name, value, kinds)
  if not vim.tbl_contains(kinds, type(value)) then
    error(('codeloupe: option %s: expected %s, got %s'):format(name, table.concat(kinds, ' or '), type(value)), 0)
  end
end

---@param opts table?
---@return codeloupe.Options
function M.merge(opts)
  opts = opts or {}
  expect('opts', opts, { 'table' })
  -- Lists replace the defaults rather than merging index by index.
  local merged = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
  for _, list_key in ipairs({ 'cmd', 'root_markers', 'filetypes' }) do
    if opts[list_key] ~= nil then
      merged[list_key] = opts[list_key]
    end
  end
  expect('cmd', merged.cmd, { 'table', 'function' })
  expect('settings', merged.settings, { 'table' })
  expect('root_markers', merged.root_markers, { 'table' })
  expect('filetypes', merged.filetypes, { 'table', 'nil' })
  expect('capabilities', merged.capabilities, { 'table', 'nil' })
  expect('on_attach', merged.on_attach, { 'function', 'nil' })
  for key, allowed in pairs({ picker = merged.picker, locations = merged.locations, layout = merged.layout }) do
    if not enums[key][allowed] then
      error(('codeloupe: invalid %s %q (expected one of: %s)'):format(
        key, tostring(allowed), table.concat(vim.tbl_keys(enums[key]), ', ')), 0)
    end
  end
  return merged
end

return M
