--- `:Codeloupe live [{query}]`: a picker that asks the server again as you type (no Telescope needed).
--- A floating prompt, the results in the server's rank order, and a preview of the file at the match line.
local indexdoc = require('codeloupe.indexdoc')
local locations = require('codeloupe.locations')
local lsp = require('codeloupe.lsp')
local search = require('codeloupe.search')

local M = {}

--- Quiet time after the last keystroke before the query is sent.
M.debounce_ms = 150

local namespace = vim.api.nvim_create_namespace('codeloupe.live')

---@class codeloupe.Live
---@field client vim.lsp.Client
---@field origin integer  the window the picker was opened from; results open there
---@field prompt { buf: integer, win: integer }
---@field list { buf: integer, win: integer }
---@field preview { buf: integer, win: integer }
---@field timer uv.uv_timer_t
---@field generation integer  bumped by every query sent; an answer for an older one is dropped
---@field request_id integer?
---@field query string  the query whose answer is shown
---@field items codeloupe.Item[]
---@field selected integer
---@field files table<string, string[]>  file lines already read for the preview

--- The open picker, nil when none (one at a time).
---@type codeloupe.Live?
M.state = nil

---@param title string
---@param config table
---@return { buf: integer, win: integer }
local function float(title, config)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = 'wipe'
  local win = vim.api.nvim_open_win(buf, false, vim.tbl_extend('force', {
    relative = 'editor',
    style = 'minimal',
    border = 'rounded',
    title = title,
  }, config))
  return { buf = buf, win = win }
end

--- Show the selected item's file in the preview, at its match line, with that one line highlighted.
---@param state codeloupe.Live
local function show_preview(state)
  local buf, item = state.preview.buf, state.items[state.selected]
  vim.api.nvim_buf_clear_namespace(buf, namespace, 0, -1)
  if not item then
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, {})
    return
  end
  local lines = state.files[item.filename]
  if not lines then
    if indexdoc.is_document(item.filename) then
      -- Asked once; the placeholder shows until the server answers, then the preview again if still on the file.
      lines = { indexdoc.loading }
      indexdoc.lines(item.filename, state.client, function(read)
        state.files[item.filename] = read
        local selected = state.items[state.selected]
        if M.state == state and selected and selected.filename == item.filename then
          show_preview(state)
        end
      end)
    else
      lines = vim.fn.filereadable(item.filename) == 1 and vim.fn.readfile(item.filename) or {}
    end
    state.files[item.filename] = lines
  end
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  -- Syntax only: a filetype would run ftplugins and could attach language servers to the scratch buffer.
  vim.bo[buf].syntax = vim.filetype.match({ filename = item.filename }) or ''
  local line = math.max(1, math.min(item.lnum, #lines))
  if #lines > 0 then
    vim.api.nvim_buf_set_extmark(buf, namespace, line - 1, 0, { line_hl_group = 'Visual' })
  end
  vim.api.nvim_win_set_cursor(state.preview.win, { line, 0 })
  vim.api.nvim_win_call(state.preview.win, function()
    vim.cmd('normal! zz')
  end)
end

---@param item codeloupe.Item?
---@return boolean
local function is_separator(item)
  return item ~= nil and item.user_data ~= nil and item.user_data.separator == true
end

--- Select the row at `index` (wrapping around); the tail's separator row is stepped over in the direction of
--- travel `step`.
---@param state codeloupe.Live
---@param index integer
---@param step integer?
local function select(state, index, step)
  if #state.items == 0 then
    return
  end
  state.selected = (index - 1) % #state.items + 1
  if is_separator(state.items[state.selected]) then
    state.selected = (state.selected + (step or 1) - 1) % #state.items + 1
  end
  vim.api.nvim_buf_clear_namespace(state.list.buf, namespace, 0, -1)
  vim.api.nvim_buf_set_extmark(state.list.buf, namespace, state.selected - 1, 0, { line_hl_group = 'PmenuSel' })
  vim.api.nvim_win_set_cursor(state.list.win, { state.selected, 0 })
  show_preview(state)
end

---@param state codeloupe.Live
---@param query string
---@param result table SearchResult
local function show(state, query, result)
  local results = search.items(result)
  state.query, state.items, state.selected = query, search.folded(results), 1
  local rows = vim.tbl_map(function(item)
    return search.describe(state.client, item)
  end, state.items)
  vim.api.nvim_buf_set_lines(state.list.buf, 0, -1, false, rows)
  local notes = table.concat(result.notes or {}, '; ')
  local title = #results == 0 and ' nothing found ' or (' %d results '):format(#results)
  vim.api.nvim_win_set_config(state.list.win, { title = notes ~= '' and (' ' .. notes .. ' ') or title })
  vim.api.nvim_buf_clear_namespace(state.list.buf, namespace, 0, -1)
  if #state.items == 0 then
    show_preview(state)
  else
    select(state, 1)
  end
end

--- Send the prompt's query; the answer is shown only if no newer query was sent meanwhile.
---@param state codeloupe.Live
local function send(state)
  local query = vim.trim(vim.api.nvim_buf_get_lines(state.prompt.buf, 0, 1, false)[1] or '')
  state.generation = state.generation + 1
  local generation = state.generation
  if state.request_id then
    lsp.cancel(state.client, state.request_id)
    state.request_id = nil
  end
  if query == '' then
    show(state, query, {})
    return
  end
  local _, request_id = lsp.request(state.client, 'codeloupe/search', search.params(query), function(err, result)
    if M.state ~= state or generation ~= state.generation then
      return
    end
    state.request_id = nil
    if err then
      vim.notify(lsp.error_message('codeloupe/search', err), vim.log.levels.ERROR)
      return
    end
    show(state, query, result or {})
  end)
  state.request_id = request_id
end

--- Close every window the picker opened (their scratch buffers go with them).
function M.close()
  local state = M.state
  if not state then
    return
  end
  M.state = nil
  state.timer:stop()
  state.timer:close()
  if state.request_id then
    lsp.cancel(state.client, state.request_id)
  end
  vim.cmd('stopinsert')
  for _, part in ipairs({ state.prompt, state.list, state.preview }) do
    if vim.api.nvim_win_is_valid(part.win) then
      vim.api.nvim_win_close(part.win, true)
    end
  end
  if vim.api.nvim_win_is_valid(state.origin) then
    vim.api.nvim_set_current_win(state.origin)
  end
end

--- Open the selected result in the window the picker came from, cursor on the match line.
function M.open_selected()
  local state = M.state
  local item = state and state.items[state.selected]
  M.close()
  if item and state and vim.api.nvim_win_is_valid(state.origin) then
    locations.jump(item, state.origin)
  end
end

---@param state codeloupe.Live
local function map_keys(state)
  local function move(step)
    return function()
      select(state, state.selected + step, step)
    end
  end
  local keys = {
    ['<C-n>'] = move(1), ['<Down>'] = move(1), ['<C-p>'] = move(-1), ['<Up>'] = move(-1),
    ['<CR>'] = M.open_selected, ['<Esc>'] = M.close, ['<C-c>'] = M.close,
  }
  for lhs, rhs in pairs(keys) do
    vim.keymap.set({ 'i', 'n' }, lhs, rhs, { buffer = state.prompt.buf, nowait = true })
  end
end

--- Open the picker with `query` typed in (may be empty).
---@param query string
function M.open(query)
  M.close()
  lsp.with_client(function(client)
    local width = math.max(40, math.floor(vim.o.columns * 0.9))
    local height = math.max(10, math.floor(vim.o.lines * 0.8))
    local row, col = math.floor((vim.o.lines - height) / 2), math.floor((vim.o.columns - width) / 2)
    local list_width = math.floor(width * 0.45) - 2
    local body = { row = row + 3, height = height - 5 }
    local state = {
      client = client,
      origin = vim.api.nvim_get_current_win(),
      list = float(' results ', { row = body.row, col = col, width = list_width, height = body.height }),
      preview = float(' preview ', {
        row = body.row, col = col + list_width + 2, width = width - list_width - 4, height = body.height,
      }),
      prompt = float(' codeloupe ', { row = row, col = col, width = width - 2, height = 1 }),
      timer = assert(vim.uv.new_timer()),
      generation = 0,
      query = '',
      items = {},
      selected = 1,
      files = {},
    }
    M.state = state
    vim.wo[state.list.win].cursorline = false
    vim.wo[state.preview.win].number = true
    vim.api.nvim_buf_set_lines(state.prompt.buf, 0, -1, false, { query })
    map_keys(state)
    -- Every change to the prompt, typed or pasted (TextChangedI waits until no typeahead is left).
    vim.api.nvim_buf_attach(state.prompt.buf, false, {
      on_lines = function()
        if M.state ~= state then
          return true
        end
        state.timer:stop()
        state.timer:start(M.debounce_ms, 0, vim.schedule_wrap(function()
          if M.state == state then
            send(state)
          end
        end))
      end,
    })
    -- Leaving the prompt (a click elsewhere, a window command) closes the picker.
    vim.api.nvim_create_autocmd('WinLeave', {
      buffer = state.prompt.buf,
      once = true,
      callback = vim.schedule_wrap(function()
        if M.state == state then
          M.close()
        end
      end),
    })
    vim.api.nvim_set_current_win(state.prompt.win)
    vim.cmd('startinsert!')
    if query ~= '' then
      send(state)
    end
  end)
end

return M
