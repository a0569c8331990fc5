-- Against the real server with no chat model: :Codeloupe ask falls back to the bundle, rendered in
-- a markdown view (never an error), and <CR> / gd on its spans and code lines open the code.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup()

local cart = H.open('shop/cart.py')
local origin = vim.api.nvim_get_current_win()
H.ready(H.client(cart))

-- A second question while the first is in flight: the view ends on the latest answer, with no error.
vim.cmd('Codeloupe ask where are cart totals rounded')
local question = 'how are passwords verified at login'
vim.cmd('Codeloupe ask ' .. question)
local view
H.wait(function()
  view = vim.fn.bufnr('codeloupe://ask')
  return view ~= -1 and H.text(view):find('## Related', 1, true) ~= nil
end, 30000, 'the ask view to show the bundle')
vim.wait(500)
local text = H.text(view)
H.equal(vim.bo[view].filetype, 'markdown', 'ask view filetype')
H.check(vim.startswith(text, '# ' .. question), 'the view starts with the question:\n' .. text)
H.check(text:find('> No narrated answer (', 1, true), 'the fallback reason is shown:\n' .. text)
-- and, as it is no chat model, where one is set (the reason alone left that to be found)
H.check(text:find("`require('codeloupe').setup()` (`:h codeloupe-settings`)", 1, true),
  'where to set a chat model is said:\n' .. text)
H.check(not H.notified('failed', vim.log.levels.ERROR), 'a fallback is not an error')
H.check(text:find('shop/auth.py', 1, true), 'the bundle lists shop/auth.py:\n' .. text)

-- Names and paths are code spans: markdown reads no intraword underscore (hash_password, __init__) as an error.
vim.cmd('syntax on')
vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
for number, line in ipairs(vim.api.nvim_buf_get_lines(view, 0, -1, false)) do
  for col = 1, #line do
    if line:sub(col, col) == '_' then
      local group = vim.fn.synIDattr(vim.fn.synID(number, col, 1), 'name')
      H.check(group ~= 'markdownError', ('markdownError at %d:%d of the ask view: %s'):format(number, col, line))
    end
  end
end
vim.api.nvim_set_current_win(origin)

-- <CR> on a span line opens the file at the span's first line, in the window the question came from.
local span_line, first
for number, line in ipairs(vim.api.nvim_buf_get_lines(view, 0, -1, false)) do
  local start = line:match('^`shop/auth%.py:(%d+)%-%d+`') or line:match('^%- `shop/auth%.py:(%d+)%-%d+`')
  if start then
    span_line, first = number, tonumber(start)
    break
  end
end
H.check(span_line, 'a followable shop/auth.py span line:\n' .. text)
vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
vim.api.nvim_win_set_cursor(0, { span_line, 0 })
H.press('<CR>')
H.equal({ H.where() }, { H.path('shop/auth.py'), first }, '<CR> on a span')
H.equal(vim.api.nvim_get_current_win(), origin, 'the span opens in the original window')

-- gd on a line of CORE code opens that very line, whose text is the line on disk.
local lines = vim.api.nvim_buf_get_lines(view, 0, -1, false)
local code_path, code_first, code_at
for number, line in ipairs(lines) do
  local path, first_line = line:match('^`(.-):(%d+)%-%d+`')
  if path and (lines[number + 1] or ''):match('^```') then
    code_path, code_first, code_at = path, tonumber(first_line), number + 2
    break
  end
end
H.check(code_at, 'CORE code is shown in a fenced block under its span:\n' .. text)
local offset = (lines[code_at + 2] or '```'):match('^```') and 0 or 2
vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
vim.api.nvim_win_set_cursor(0, { code_at + offset, 0 })
H.press('gd')
H.equal({ H.where() }, { H.path(code_path), code_first + offset }, 'gd on a code line')
H.equal(vim.api.nvim_get_current_line(), lines[code_at + offset], 'the shown code is the line on disk')
