-- Against the real server: a file whose name holds a line break, a bidi override and an escape sequence, and whose
-- matching line holds an escape sequence and a bidi override. vim.ui.select shows it on one line, escaped as the
-- views show names (`one_line`), and choosing it opens the file; its quickfix entry's text is escaped likewise and
-- the entry opens the file, and so does a code lens's list of uses. The cached-questions picker shows a question on
-- one line.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
local hostile = os.getenv('CODELOUPE_TEST_HOSTILE')
H.check(hostile, 'CODELOUPE_TEST_HOSTILE is not set')
H.setup({ picker = 'select' })
vim.o.columns = 200 -- the picker cuts a line to the screen
local query = 'quuxshade'
local shown_path = 'nl\\n### 9. `forged.py`\\nx\\u202e\\x1b[1m.py'
local shown_line = [[return 'quuxshade \x1b[31m\u202e']]

--- `text` holds no line break, escape character or bidi override.
---@param text string
---@param what string
local function one_plain_line(text, what)
  H.check(not text:find('[\n\r\27]') and not text:find('\u{202e}', 1, true),
    ('%s is not one escaped line: %q'):format(what, text))
end

--- Once the quickfix list is filled: the hostile file's entry shows its line escaped (`needle`) on one plain line,
--- and `:cc` on it opens the file.
---@param what string
---@param needle string
---@param timeout_ms integer
local function check_quickfix(what, needle, timeout_ms)
  H.wait(function()
    return #vim.fn.getqflist() > 0
  end, timeout_ms, what)
  local entry
  for index, item in ipairs(vim.fn.getqflist()) do
    if item.bufnr ~= 0 and vim.api.nvim_buf_get_name(item.bufnr) == H.path(hostile) then
      entry = index
      one_plain_line(item.text, what)
      H.check(item.text:find(needle, 1, true), what .. ' shows the line escaped: ' .. item.text)
    end
  end
  H.check(entry, what .. ' holds the file: ' .. vim.inspect(vim.fn.getqflist()))
  vim.cmd('cc ' .. entry)
  H.equal(vim.api.nvim_buf_get_name(0), H.path(hostile), what .. ' opens the file')
end

local client = H.client(H.open('shop/cart.py'))
H.ready(client)

-- vim.ui.select: the hostile file's entry is one line naming it escaped; choosing it opens the real file.
local label
vim.ui.select = function(items, opts, on_choice)
  for _, item in ipairs(items) do
    if item.filename == H.path(hostile) then
      label = opts.format_item(item)
      on_choice(item)
      return
    end
  end
  H.fail('the picker does not offer the file:\n' .. table.concat(vim.tbl_map(opts.format_item, items), '\n'))
end
vim.cmd('Codeloupe search ' .. query)
H.wait(function()
  return label ~= nil
end, 20000, 'the picker')
one_plain_line(label, 'the picker line')
H.check(label:find(shown_path, 1, true) and label:find(shown_line, 1, true),
  'the picker line names the file and its line escaped: ' .. label)
H.equal(vim.api.nvim_buf_get_name(0), H.path(hostile), 'choosing the entry opens the file')

-- The quickfix list: the entry's text is escaped, and the entry opens the file.
H.open('shop/cart.py')
vim.cmd('Codeloupe search! ' .. query)
check_quickfix('the quickfix text', shown_line, 20000)

-- A code lens's uses (codeloupe.showLocations, handled by the plugin) in the quickfix list: the use in the file
-- shows its line escaped, and opens the file.
local auth = H.open('shop/auth.py')
local verify_line = H.line_of('shop/auth.py', 'def verify_password')
H.wait(function()
  for _, lens in ipairs(vim.lsp.codelens.get(auth)) do
    if lens.range.start.line == verify_line - 1 and lens.command and lens.command.command == 'codeloupe.showLocations' then
      return true
    end
  end
  vim.cmd('doautocmd BufEnter') -- lenses are requested again on BufEnter
end, 20000, 'the code lens on def verify_password')
vim.fn.setqflist({}, 'r', { items = {} })
vim.api.nvim_win_set_cursor(0, { verify_line, 0 })
vim.lsp.codelens.run()
check_quickfix("the lens's quickfix text", [[verify_password('\x1b[31m\u202e']], 10000)

-- The cached questions' picker: a question (here one pasted with a line break) is shown on one line.
local offered
vim.ui.select = function(items, opts, _)
  offered = opts
  H.check(items[#items] == require('codeloupe.flows').new_question, 'the picker offers a new question')
end
vim.cmd('Codeloupe ask')
H.wait(function()
  return offered ~= nil
end, 10000, 'the ask picker')
H.check(offered.format_item, 'the ask picker formats its entries')
H.equal(offered.format_item('why does\nit \27[1mfail\u{202e}'), 'why does\\nit \\x1b[1mfail\\u202e', 'a question')
