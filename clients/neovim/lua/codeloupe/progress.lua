--- Indexing progress ($/progress from the server) for the statusline and the command line; never
--- |vim.notify()|, so a cold index leaves nothing in |:messages|.
local config = require('codeloupe.config')
local lsp = require('codeloupe.lsp')

local M = {}

---@class codeloupe.ProgressState
---@field active boolean
---@field title string?
---@field message string?
---@field percentage integer?

---@type table<integer, codeloupe.ProgressState>  client id -> latest indexing progress
M.state = {}

--- Request-scoped progress (e.g. an ask's events) goes to its own listener, not to the index state.
---@type table<string|integer, fun(value: table)>
local listeners = {}

local echo_interval_ms = 500
local last_echo_at = 0

---@param token string|integer
---@param listener fun(value: table)
function M.listen(token, listener)
  listeners[token] = listener
end

---@param token string|integer
function M.unlisten(token)
  listeners[token] = nil
end

---@param state codeloupe.ProgressState
---@return string
local function describe(state)
  local text = state.message or state.title or 'indexing'
  if state.active and state.percentage then
    text = ('%s (%d%%)'):format(text, state.percentage)
  end
  return text
end

---@param client vim.lsp.Client
local function refresh_lenses(client)
  if not config.options.codelens then
    return
  end
  for bufnr in pairs(client.attached_buffers or {}) do
    if vim.api.nvim_buf_is_loaded(bufnr) then
      vim.lsp.codelens.refresh({ bufnr = bufnr })
    end
  end
end

--- LspProgress autocmd callback.
---@param ev { data: { client_id: integer, params: lsp.ProgressParams } }
function M.on_progress(ev)
  local client = vim.lsp.get_client_by_id(ev.data.client_id)
  if not client or client.name ~= lsp.name then
    return
  end
  local params = ev.data.params
  local value = params.value
  if type(value) ~= 'table' then
    return
  end
  local listener = listeners[params.token]
  if listener then
    listener(value)
    return
  end

  local state = M.state[client.id] or { active = false }
  M.state[client.id] = state
  if value.kind == 'begin' then
    state.active, state.title, state.message, state.percentage = true, value.title, value.message, value.percentage
  elseif value.kind == 'report' then
    state.message = value.message or state.message
    state.percentage = value.percentage or state.percentage
  elseif value.kind == 'end' then
    state.active, state.percentage = false, nil
    state.message = value.message or ('%s done'):format(state.title or 'indexing')
    refresh_lenses(client)
  end

  vim.cmd('redrawstatus')
  if config.options.progress then
    M.echo(client, state)
  end
end

--- Show indexing progress in the command line without adding it to |:messages| (nvim_echo with
--- history off), at most every `echo_interval_ms`; the end clears it. The statusline and
--- vim.lsp.status() carry the same state.
---@param client vim.lsp.Client
---@param state codeloupe.ProgressState
function M.echo(client, state)
  local now = (vim.uv or vim.loop).now()
  if state.active and now - last_echo_at < echo_interval_ms then
    return
  end
  last_echo_at = now
  local text = state.active and ('codeloupe: ' .. describe(state)) or ''
  if text ~= '' and #vim.lsp.get_clients({ name = lsp.name }) > 1 and client.root_dir then
    text = ('%s (%s)'):format(text, vim.fs.basename(client.root_dir))
  end
  -- Truncate to the command line so a long message never asks for Enter.
  text = text:sub(1, math.max(0, vim.v.echospace - 1))
  vim.api.nvim_echo({ { text } }, false, {})
end

--- Statusline text for the current buffer's workspace: '' when no codeloupe client is attached.
---@return string
function M.status()
  local client = vim.lsp.get_clients({ name = lsp.name, bufnr = vim.api.nvim_get_current_buf() })[1]
  if not client then
    return ''
  end
  local state = M.state[client.id]
  if not state then
    return 'codeloupe'
  end
  if state.active then
    return 'codeloupe: ' .. describe(state)
  end
  return 'codeloupe: ready'
end

return M
