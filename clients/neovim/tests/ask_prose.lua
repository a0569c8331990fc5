-- Against the real server and the scripted chat model: the model's words are shown as it wrote them (a `\*`, a
-- backslash, brackets), and none of what it writes is followed by <CR> or cuts the answer short: a line that
-- looks like the engine's "not cited" footer, a heading naming a file, a `[1]` or a list entry naming a span.
-- <CR> follows the answer's own reference to the cited span and the spliced code.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.scripted_ask()

vim.cmd('Codeloupe ask how are passwords verified at login')
local view = H.view('codeloupe://ask', '## Not cited', 30000)
local text = H.text(view)
local lines = vim.api.nvim_buf_get_lines(view, 0, -1, false)
H.check(not text:find('No narrated answer', 1, true), 'the model answered:\n' .. text)

--- The number of the view's line that is `wanted` exactly.
---@param wanted string
---@return integer
local function line_number(wanted)
  for number, line in ipairs(lines) do
    if line == wanted then
      return number
    end
  end
  H.fail(('no line %q in the view:\n%s'):format(wanted, text))
  return 0
end

-- As written: the markdown escapes of the model's answer are the server's, for a renderer; this view shows text.
line_number([[A literal \* star, a path C:\shop\cart and [not a link] stay as written.]])
-- Nothing the model writes ends the answer: its copy of the engine's footer heading is its own text.
line_number('**Also retrieved, not cited**')
line_number('Still the model speaking, after its fake footer.')

--- <CR> on line `number` of the view opens nothing.
---@param number integer
---@param what string
local function opens_nothing(number, what)
  vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
  vim.api.nvim_win_set_cursor(0, { number, 0 })
  local before = #H.notifications
  H.press('<CR>')
  H.equal(vim.api.nvim_get_current_buf(), view, what .. ': <CR> stays in the view')
  H.check(#H.notifications > before and H.notified('nothing to open on this line'), what .. ': says nothing opens')
end
opens_nothing(line_number('### 1. `shop/auth.py`'), "the model's heading naming a file")
opens_nothing(line_number('- [1] `shop/sessions.py` and [1] again'), "the model's list entry and [1]")

-- The answer's reference to the cited span (where the model's [[1]] stood) opens it; so does the code below it.
local cited = line_number('## Cited') + 1
local path, first = lines[cited]:match('^%- %[1%] `(.-):(%d+)%-%d+`')
H.check(path, 'the Cited list names the span:\n' .. text)
first = tonumber(first)
local ref = H.buffer_line(view, 'Passwords are checked when a session logs in. `(' .. path .. ':')
vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
vim.api.nvim_win_set_cursor(0, { ref, 0 })
H.press('<CR>')
H.equal({ H.where() }, { H.path(path), first }, '<CR> on the reference where the marker stood')

local fence
for number, line in ipairs(lines) do
  if line:match('^```') then
    fence = number
    break
  end
end
H.check(fence and lines[fence - 1]:find(path, 1, true), 'the spliced code sits under its caption:\n' .. text)
vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
vim.api.nvim_win_set_cursor(0, { fence + 1, 0 })
H.press('<CR>')
H.equal({ H.where() }, { H.path(path), first }, '<CR> on the first spliced line')
H.equal(vim.api.nvim_get_current_line(), lines[fence + 1], 'the spliced code is the line on disk')
