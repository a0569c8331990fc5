--- Options for the codeloupe plugin: defaults, validation, and the settings sent to the server.
local M = {}

---@class codeloupe.Options
---@field cmd string[]|fun(dispatchers: table): table  How to start the server (see |vim.lsp.ClientConfig|).
---@field settings table<string, any>  Server settings (snake_case or camelCase keys, see docs/protocol.md).
---@field root_markers (string|string[])[]  Workspace root markers, in priority order.
---@field filetypes string[]?  Restrict attaching to these filetypes; nil attaches to every file buffer.
---@field codelens boolean  Refresh code lenses on BufEnter/BufWritePost.
---@field progress boolean  Also echo indexing progress in the command line (never through |vim.notify()|).
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

---@alias codeloupe.Check fun(value: any): string?  nil when `value` is fine, else what the option takes

--- A check that `value`'s type is one of `kinds`.
---@param ... string
---@return codeloupe.Check
local function kinds(...)
  local allowed = { ... }
  local words = { table = 'a table', boolean = 'true or false', ['function'] = 'a function', ['nil'] = 'nil' }
  return function(value)
    if not vim.tbl_contains(allowed, type(value)) then
      return table.concat(vim.tbl_map(function(kind)
        return words[kind]
      end, allowed), ' or ')
    end
  end
end

--- A check that `value` is one of `names` (or nil, when `optional`).
---@param names string[]
---@param optional boolean?
---@return codeloupe.Check
local function one_of(names, optional)
  return function(value)
    if not (vim.tbl_contains(names, value) or (optional and value == nil)) then
      return ('one of %s%s'):format(table.concat(vim.tbl_map(function(name)
        return ("'%s'"):format(name)
      end, names), ', '), optional and ' (or nil)' or '')
    end
  end
end

--- A check that `value` is a list whose entries pass `entry` (or nil, when `optional`).
---@param what string  what the option takes, for the message
---@param entry fun(item: any): boolean
---@param optional boolean?
---@return codeloupe.Check
local function list_of(what, entry, optional)
  return function(value)
    if optional and value == nil then
      return nil
    end
    if type(value) ~= 'table' or not vim.islist(value) or #value == 0 then
      return what
    end
    for _, item in ipairs(value) do
      if not entry(item) then
        return what
      end
    end
  end
end

---@param item any
---@return boolean
local function is_string(item)
  return type(item) == 'string'
end

local DOCS = { 'code', 'docs', 'both' }

--- What each option takes; a table of checks is an option that is itself a table of these fields.
---@type table<string, codeloupe.Check|table<string, codeloupe.Check>>
local CHECKS = {
  cmd = function(value)
    if type(value) ~= 'function' then
      return list_of('a list of strings (the command and its arguments) or a function', is_string)(value)
    end
  end,
  settings = kinds('table'),
  root_markers = list_of('a list of file names (an entry may be a list of names of equal priority)', function(item)
    return is_string(item) or (type(item) == 'table' and list_of('', is_string)(item) == nil)
  end),
  filetypes = list_of('a list of filetypes (or nil)', is_string, true),
  codelens = kinds('boolean'),
  progress = kinds('boolean'),
  picker = one_of({ 'auto', 'telescope', 'select' }),
  search = {
    limit = function(value)
      if value ~= nil and not (type(value) == 'number' and value >= 1 and value == math.floor(value)) then
        return 'a whole number of files, 1 or more (or nil)'
      end
    end,
    docs = one_of(DOCS, true),
  },
  ask = { docs = one_of(DOCS, true), agents = kinds('boolean', 'nil') },
  layout = one_of({ 'vsplit', 'split', 'float', 'tab' }),
  locations = one_of({ 'quickfix', 'loclist' }),
  capabilities = kinds('table', 'nil'),
  on_attach = kinds('function', 'nil'),
}

---@param value any
---@return string
local function show(value)
  if type(value) == 'string' then
    return ("'%s'"):format(value)
  end
  if type(value) == 'table' then
    return next(value) == nil and 'an empty table' or 'a table'
  end
  return tostring(value)
end

---@param checks table<string, any>
---@return string
local function known(checks)
  local names = vim.tbl_keys(checks)
  table.sort(names)
  return table.concat(names, ', ')
end

--- Check `merged` (the defaults with `given` over them) against `checks`; a value it does not take is reported and
--- replaced by the default, an unknown name is reported and dropped, so that setup() still starts what it can.
---@param merged table
---@param given table
---@param defaults table
---@param checks table<string, any>
---@param prefix string  the parent option's name and a dot, or ''
---@param problems string[]  appended to
local function check(merged, given, defaults, checks, prefix, problems)
  local names = vim.tbl_keys(given)
  table.sort(names, function(a, b)
    return tostring(a) < tostring(b)
  end)
  for _, name in ipairs(names) do
    local option = checks[name]
    if option == nil then
      problems[#problems + 1] = ('unknown option %s%s (the options are: %s)'):format(prefix, tostring(name),
        known(checks))
      merged[name] = nil
    elseif type(option) == 'table' then
      if type(merged[name]) ~= 'table' then
        problems[#problems + 1] = ('%s%s takes a table, not %s; using the default'):format(prefix, name,
          show(merged[name]))
        merged[name] = vim.deepcopy(defaults[name])
      else
        check(merged[name], given[name], defaults[name], option, prefix .. name .. '.', problems)
      end
    else
      local takes = option(merged[name])
      if takes then
        problems[#problems + 1] = ('%s%s takes %s, not %s; using the default'):format(prefix, name, takes,
          show(merged[name]))
        merged[name] = vim.deepcopy(defaults[name])
      end
    end
  end
end

--- The options: the defaults with `opts` over them, and what was wrong in `opts` (each such option left at its
--- default), for setup() to say in one message rather than stop the user's config with a Lua error.
---@param opts any
---@return codeloupe.Options options, string[] problems
function M.merge(opts)
  if opts == nil then
    opts = {}
  end
  if type(opts) ~= 'table' then
    return vim.deepcopy(M.defaults), { ('setup() takes a table of options, not %s; using the defaults'):format(
      show(opts)) }
  end
  -- Lists replace the defaults rather than merging index by index.
  local merged = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
  for _, list_key in ipairs({ 'cmd', 'root_markers', 'filetypes' }) do
    if opts[list_key] ~= nil then
      merged[list_key] = opts[list_key]
    end
  end
  local problems = {}
  check(merged, opts, M.defaults, CHECKS, '', problems)
  return merged, problems
end

return M
