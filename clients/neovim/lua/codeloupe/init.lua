--- codeloupe for Neovim: a thin layer over the built-in LSP client talking to `codeloupe-lsp`.
local config = require('codeloupe.config')
local indexdoc = require('codeloupe.indexdoc')
local lsp = require('codeloupe.lsp')
local progress = require('codeloupe.progress')

local M = {}

local group = vim.api.nvim_create_augroup('codeloupe', { clear = true })
local lens_group = vim.api.nvim_create_augroup('codeloupe.codelens', { clear = true })

---@param bufnr integer
local function refresh_lenses(bufnr)
  if vim.api.nvim_buf_is_loaded(bufnr) then
    vim.lsp.codelens.refresh({ bufnr = bufnr })
  end
end

--- Refresh `client`'s lenses in `bufnr` on BufEnter / BufWritePost when the `codelens` option is on; with it
--- off, drop the refresh and the lenses shown. Run on attach, and again for every attached buffer by a later
--- setup() call, so that turning the option off (or on) takes effect in buffers already open.
---@param client vim.lsp.Client
---@param bufnr integer
local function wire_lenses(client, bufnr)
  vim.api.nvim_clear_autocmds({ group = lens_group, buffer = bufnr })
  if not (config.options.codelens and client.server_capabilities.codeLensProvider) then
    if vim.api.nvim_buf_is_valid(bufnr) then
      vim.lsp.codelens.clear(client.id, bufnr)
    end
    return
  end
  vim.api.nvim_create_autocmd({ 'BufEnter', 'BufWritePost' }, {
    group = lens_group,
    buffer = bufnr,
    callback = function(args)
      refresh_lenses(args.buf)
    end,
  })
  refresh_lenses(bufnr)
end

---@param ev { buf: integer, data: { client_id: integer } }
local function on_attach(ev)
  local client = vim.lsp.get_client_by_id(ev.data.client_id)
  if not client or client.name ~= lsp.name then
    return
  end
  lsp.flush_waiting(client)
  wire_lenses(client, ev.buf)
end

---@param ev { buf: integer, data: { client_id: integer } }
local function on_detach(ev)
  local client = vim.lsp.get_client_by_id(ev.data.client_id)
  if client and client.name == lsp.name then
    vim.api.nvim_clear_autocmds({ group = lens_group, buffer = ev.buf })
  end
end

--- Configure and start codeloupe. Calling it again applies new options and pushes new settings to
--- running servers.
---@param opts table?  see |codeloupe-options|
function M.setup(opts)
  local reconfigure = config.configured
  local options, problems = config.merge(opts)
  config.options = options
  config.configured = true
  if #problems > 0 then
    -- One message, and the rest of the options still apply: an error raised here would stop the user's init.lua
    -- with a Lua traceback, and everything after this call in it with it.
    local text = #problems == 1 and problems[1] or ('\n- ' .. table.concat(problems, '\n- '))
    vim.notify('codeloupe: setup(): ' .. text, vim.log.levels.WARN)
  end

  vim.api.nvim_clear_autocmds({ group = group })
  vim.api.nvim_create_autocmd('LspProgress', { group = group, callback = progress.on_progress })
  vim.api.nvim_create_autocmd('LspAttach', { group = group, callback = on_attach })
  vim.api.nvim_create_autocmd('LspDetach', { group = group, callback = on_detach })
  vim.api.nvim_create_autocmd('BufReadCmd', {
    group = group,
    pattern = indexdoc.pattern,
    callback = function(ev)
      indexdoc.read(ev.buf)
    end,
  })

  if lsp.enable(config.options) and reconfigure then
    lsp.push_settings(config.options)
    for _, client in ipairs(lsp.clients()) do
      for bufnr in pairs(client.attached_buffers or {}) do
        wire_lenses(client, bufnr)
      end
    end
  end
end

--- Statusline component: indexing progress of the current buffer's workspace ('' when none).
---@return string
function M.status()
  return progress.status()
end

--- `:Codeloupe search[!] [{query}]` as a function: without a query (a mapping calls it with none), the word under
--- the cursor, as the command takes it.
---@param query string?
---@param to_quickfix boolean?
function M.search(query, to_quickfix)
  query = query or require('codeloupe.commands').implicit_query({ range = 0, line1 = 0, line2 = 0 })
  require('codeloupe.search').run(query, to_quickfix == true)
end

--- `:Codeloupe live [{query}]` as a function (for a mapping).
---@param query string?
function M.live(query)
  require('codeloupe.live').open(query or '')
end

--- `:Codeloupe ask [{question}]` as a function: without a question (a mapping calls it with none), the cached
--- questions to choose from, as the command offers them.
---@param question string?
function M.ask(question)
  if question == nil then
    require('codeloupe.ask').pick()
  else
    require('codeloupe.ask').run(question)
  end
end

--- `:Codeloupe graph [map | node X | path A B]` as a function: `args` the command's words, as a list or as the
--- command line gives them (`'node shop/cart.py'`, split as the command splits them).
---@param args (string[]|string)?
function M.graph(args)
  if type(args) == 'string' then
    args = require('codeloupe.commands').words(args)
  elseif args ~= nil and not (type(args) == 'table' and vim.iter(args):all(function(arg)
    return type(arg) == 'string'
  end)) then
    vim.notify(("codeloupe: graph() takes the command's words as a list of strings or one string, such as "
      .. "{ 'node', 'shop/cart.py' } or 'node shop/cart.py'; got %s"):format(vim.inspect(args)), vim.log.levels.ERROR)
    return
  end
  require('codeloupe.graph').run(args or {})
end

--- `:Codeloupe reindex` as a function.
function M.reindex()
  require('codeloupe.index').reindex()
end

return M
