-- Against the real server: :Codeloupe live re-queries as the prompt changes, shows the server's rank
-- order, drops a late answer to an older query, previews at the match line, opens there, and closes clean.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup({ picker = 'select' })
local live = require('codeloupe.live')
local search = require('codeloupe.search')

local cart = H.open('shop/cart.py')
local client = H.client(cart)
H.ready(client)
local windows_before = vim.api.nvim_list_wins()
local buffers_before = vim.api.nvim_list_bufs()

--- The picker's rows once the answer to `query` is shown.
---@param query string
---@return string[]
local function rows_for(query)
  H.wait(function()
    return live.state and live.state.query == query
  end, 20000, function()
    return 'the picker to show the answer to ' .. query .. ' (shows ' .. vim.inspect(live.state and live.state.query) .. ')'
  end)
  return vim.api.nvim_buf_get_lines(live.state.list.buf, 0, -1, false)
end

--- The server's own answer to `query`, as picker items in rank order.
---@param query string
---@return codeloupe.Item[]
local function server_items(query)
  local response = client:request_sync('codeloupe/search', search.params(query), 20000)
  H.check(response and not response.err, 'codeloupe/search failed: ' .. vim.inspect(response))
  return search.items(response.result)
end

---@param rows string[]
---@param items codeloupe.Item[]
---@param what string
local function check_rank_order(rows, items, what)
  H.check(#items > 0, what .. ': the server finds something')
  H.equal(#rows, #items, what .. ': one row per result')
  for index, item in ipairs(items) do
    local head = ('%s:%d  '):format(vim.fs.relpath(H.root, item.filename), item.lnum)
    H.check(vim.startswith(rows[index], head), ('%s: row %d is %q, expected it to start with %q'):format(
      what, index, rows[index], head))
    H.check(not rows[index]:find('\n'), 'one line per row')
  end
end

vim.cmd('Codeloupe live')
H.check(live.state and vim.api.nvim_get_current_win() == live.state.prompt.win, 'the prompt window has the cursor')

-- Typing a query in the prompt asks the server; the rows are its answer in rank order.
local first = 'verify password hash'
H.press('i' .. first)
local rows = rows_for(first)
local first_items = server_items(first)
check_rank_order(rows, first_items, first)

-- The preview shows the selected result's file at its match line, and highlights that one line only.
local function check_preview(item)
  local preview = live.state.preview
  H.equal(vim.api.nvim_buf_get_lines(preview.buf, 0, -1, false), vim.fn.readfile(item.filename), 'preview holds the file')
  H.equal(vim.api.nvim_win_get_cursor(preview.win)[1], item.lnum, 'preview at the anchor line')
  local marks = vim.api.nvim_buf_get_extmarks(preview.buf, -1, 0, -1, { details = true })
  H.equal(#marks, 1, 'one highlight in the preview')
  H.equal(marks[1][2], item.lnum - 1, 'the highlight is on the anchor line')
  H.check(marks[1][4].line_hl_group and (marks[1][4].end_row == nil or marks[1][4].end_row == item.lnum - 1),
    'the highlight covers one line: ' .. vim.inspect(marks[1]))
end
check_preview(first_items[1])

-- <C-n> / <Down> move the selection and the preview with it; <C-p> / <Up> move back.
H.check(#first_items > 1, 'the first query finds several results to move between')
H.press('A<C-n>')
H.equal(live.state.selected, 2, '<C-n> selects the next row')
check_preview(first_items[2])
H.press('A<Up>')
H.equal(live.state.selected, 1, '<Up> selects the previous row')
H.press('A<Down>')
H.press('A<C-p>')
H.equal(live.state.selected, 1, '<Down> then <C-p>')

-- Keystrokes closer together than the debounce send one query, not one per keystroke (the event loop
-- runs between them; a long debounce keeps this independent of the machine's load).
live.debounce_ms = 1000
local sent = {}
local send_request = client.request
client.request = function(self, method, params, ...)
  if method == 'codeloupe/search' then
    sent[#sent + 1] = params.query
  end
  return send_request(self, method, params, ...)
end
H.press('cc')
for _, char in ipairs({ 'c', 'a', 'r', 't' }) do
  H.press('A' .. char)
  vim.wait(30)
end
rows_for('cart')
H.equal(sent, { 'cart' }, 'queries sent while typing "cart"')
client.request = send_request
live.debounce_ms = 150

-- A late answer to an older query is dropped: hold back the answer to the next query, change the query,
-- and let the held answer arrive after the newer one.
local held
local request = client.request
client.request = function(self, method, params, handler, ...)
  if method == 'codeloupe/search' and params.query == 'session token' then
    return request(self, method, params, function(...)
      local args = { ... }
      held = function()
        handler(unpack(args))
      end
    end, ...)
  end
  return request(self, method, params, handler, ...)
end
H.press('cc' .. 'session token')
H.wait(function()
  return held ~= nil
end, 20000, 'the answer to "session token" (held back)')
local second = 'cart total discount'
H.press('cc' .. second)
rows = rows_for(second)
held()
client.request = request
H.equal(live.state.query, second, 'the late answer to the older query is dropped')
local second_items = server_items(second)
check_rank_order(vim.api.nvim_buf_get_lines(live.state.list.buf, 0, -1, false), second_items, second)

-- <CR> opens the selected result where the picker came from, cursor on its match line; nothing stays open.
H.press('A<CR>')
H.check(live.state == nil, 'the picker closed')
H.equal({ H.where() }, { second_items[1].filename, second_items[1].lnum }, '<CR> opens at the match line')
H.equal(vim.api.nvim_list_wins(), windows_before, 'no stray windows after <CR>')

-- An initial query is sent at once; <Esc> closes every window and buffer the picker opened.
H.open('shop/cart.py')
local buffers = vim.api.nvim_list_bufs()
vim.cmd('Codeloupe live ' .. first)
check_rank_order(rows_for(first), first_items, 'initial query')
H.press('<Esc>')
H.check(live.state == nil, '<Esc> closes the picker')
vim.wait(50)
H.equal(vim.api.nvim_list_wins(), windows_before, 'no stray windows after <Esc>')
H.equal(vim.api.nvim_list_bufs(), buffers, 'no stray buffers after <Esc>')
H.check(#buffers >= #buffers_before, 'buffers')
vim.cmd('Codeloupe live')
H.press('i<C-c>')
H.check(live.state == nil, '<C-c> closes the picker')
H.equal(vim.api.nvim_list_bufs(), buffers, 'no stray buffers after <C-c>')
