-- Against the real server: a bundle with a long tail (thirty files share one rare word, past the limit and the
-- lanes' short lists). The quickfix list, vim.ui.select and :Codeloupe live fold the tail under one separator
-- after CORE and RELATED, every file of the bundle still listed; :cnext and the live picker's keys step over
-- the separator; the Telescope sorter wrapper ranks the tail last; the Telescope previewer function loads a
-- file on disk through the loader it is given.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup({ picker = 'select' })
local search = require('codeloupe.search')

local client = H.client(H.open('shop/auth.py'))
H.ready(client)
local query = 'quuxframe'
local response = client:request_sync('codeloupe/search', search.params(query), 20000)
H.check(response and not response.err, 'codeloupe/search failed: ' .. vim.inspect(response))
local result = response.result
local files, tail = {}, {}
for _, tier in ipairs({ 'core', 'related' }) do
  for _, file in ipairs(result[tier]) do
    files[#files + 1] = file.path
    if file.tail then
      tail[#tail + 1] = file.path
    end
  end
end
H.check(#tail > 0 and #tail < #result.related, ('a tail and a head in RELATED: %d of %d'):format(#tail, #result.related))

--- The workspace-relative path of a quickfix entry's file.
local function path_of(item)
  return vim.api.nvim_buf_get_name(item.bufnr):sub(#H.root + 2)
end

--- Every file of the bundle, each once, in the bundle's order; and the index of the separator.
---@param entries table[] quickfix entries or picker items
---@param name fun(entry: table): string
---@param is_separator fun(entry: table): boolean
local function check_folded(entries, name, is_separator, what)
  local seen, order, fold = {}, {}, nil
  for index, entry in ipairs(entries) do
    if is_separator(entry) then
      H.check(fold == nil, what .. ': one separator')
      fold = index
    else
      local path = name(entry)
      if not seen[path] then
        seen[path] = true
        order[#order + 1] = path
      end
      local is_tail = vim.tbl_contains(tail, path)
      H.equal(fold ~= nil, is_tail, what .. ': ' .. path .. ' is after the separator exactly when it is in the tail')
      H.equal(entry.text:sub(1, 4) == 'TAIL', is_tail, what .. ': tail entries are labelled TAIL: ' .. entry.text)
    end
  end
  H.equal(order, files, what .. ': every file of the bundle, in its order')
  return fold
end

-- :Codeloupe search! : the quickfix list.
vim.cmd('Codeloupe search! ' .. query)
H.wait(function()
  return #vim.fn.getqflist() > 0
end, 20000, 'quickfix items')
local qf = vim.fn.getqflist()
local fold = check_folded(qf, path_of, function(item)
  return item.valid == 0
end, 'quickfix')
H.equal(qf[fold].text, ('── %d more related files (the long tail) ──'):format(#tail), 'the separator names the tail')
H.equal(qf[fold].bufnr, 0, 'the separator is no file')
-- :cnext from the last entry before the separator steps over it to the first tail file.
vim.cmd('cc ' .. (fold - 1))
vim.cmd('cnext')
H.equal(vim.fn.getqflist({ idx = 0 }).idx, fold + 1, ':cnext steps over the separator')
H.equal(vim.api.nvim_buf_get_name(0), H.path(tail[1]), 'the first tail file opened')
vim.cmd('cclose')

-- vim.ui.select: the same fold; choosing the separator opens nothing, choosing the last tail file opens it.
local offered, labels
vim.ui.select = function(items, opts, on_choice)
  offered = items
  labels = vim.tbl_map(opts.format_item, items)
  on_choice(items[#items])
end
H.open('shop/cart.py')
vim.cmd('Codeloupe search ' .. query)
H.wait(function()
  return offered ~= nil and vim.api.nvim_buf_get_name(0) == H.path(tail[#tail])
end, 20000, 'the picker to open the last tail file')
local picked_fold = check_folded(offered, function(item)
  return item.filename:sub(#H.root + 2)
end, function(item)
  return item.user_data.separator == true
end, 'picker')
H.equal(labels[picked_fold], qf[fold].text, 'the picker shows the separator line')
local before = vim.api.nvim_buf_get_name(0)
vim.ui.select = function(items, _, on_choice)
  on_choice(items[picked_fold])
end
vim.cmd('Codeloupe search ' .. query)
vim.wait(500)
H.equal(vim.api.nvim_buf_get_name(0), before, 'choosing the separator opens nothing')

-- Telescope's sorter, wrapped: a tail entry ranks after any other match, a filtered one stays filtered.
local items = search.items(result)
local sorter = search.tail_last({
  scoring_function = function(_, prompt, line)
    return line:find(prompt, 1, true) and 0.5 or -1
  end,
})
local head_item, tail_item
for _, item in ipairs(items) do
  if item.user_data.tail then
    tail_item = tail_item or item
  else
    head_item = head_item or item
  end
end
local head_score = sorter:scoring_function('', 'x', { value = head_item })
local tail_score = sorter:scoring_function('', 'x', { value = tail_item })
H.check(tail_score > head_score and tail_score > 1, ('tail last: %s > %s'):format(tail_score, head_score))
H.equal(sorter:scoring_function('zzz', 'x', { value = tail_item }), -1, 'a filtered tail entry stays filtered')

-- The previewer function: a file on disk goes through the loader (Telescope's buffer_previewer_maker), then the
-- match line is highlighted with the cursor on it.
local buf = vim.api.nvim_create_buf(false, true)
local win = vim.api.nvim_open_win(buf, false, { relative = 'editor', row = 1, col = 1, width = 60, height = 5 })
local loaded
search.preview(tail_item, buf, win, function(filename, done)
  loaded = filename
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.fn.readfile(filename))
  done(buf)
end)
H.equal(loaded, tail_item.filename, 'the loader read the file on disk')
H.equal(vim.api.nvim_win_get_cursor(win)[1], tail_item.lnum, 'the preview sits on the match line')
local marks = vim.api.nvim_buf_get_extmarks(buf, vim.api.nvim_create_namespace('codeloupe.preview'), 0, -1, {})
H.equal(#marks, 1, 'one highlighted line')
H.equal(marks[1][2], tail_item.lnum - 1, 'the match line is highlighted')
vim.api.nvim_win_close(win, true)

-- :Codeloupe live: the same fold, one separator row; moving down or up steps over it.
local live = require('codeloupe.live')
H.open('shop/cart.py')
vim.cmd('Codeloupe live ' .. query)
H.wait(function()
  return live.state and live.state.query == query and #live.state.items > 0
end, 20000, 'the live picker to show the answer')
local rows = vim.api.nvim_buf_get_lines(live.state.list.buf, 0, -1, false)
local live_fold = check_folded(live.state.items, function(item)
  return item.filename:sub(#H.root + 2)
end, function(item)
  return item.user_data.separator == true
end, 'live picker')
H.equal(rows[live_fold], qf[fold].text, 'the live picker shows the separator row')
H.press('A' .. string.rep('<C-n>', live_fold - 2))
H.equal(live.state.selected, live_fold - 1, 'the row above the separator')
H.press('<C-n>')
H.equal(live.state.selected, live_fold + 1, '<C-n> steps over the separator')
H.press('<C-p>')
H.equal(live.state.selected, live_fold - 1, '<C-p> steps back over it')
H.press('<Esc>')
os.exit(0)
