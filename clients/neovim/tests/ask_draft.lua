-- Against the real server and the scripted chat model, which sends part of its answer and then holds: the view
-- shows the answer so far as the final view shows the answer's parts, the model's words as written (the deltas'
-- markdown escapes them for a renderer: `\*` read `\\*`) and the spliced code under its caption, never the markdown.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.scripted_ask()

local words = [[A literal \* star, a path C:\shop\cart and [not a link] stay as written.]]
vim.cmd('Codeloupe ask how are passwords verified at login')
local view = H.view('codeloupe://ask', words, 30000)
local text = H.text(view)
local lines = vim.api.nvim_buf_get_lines(view, 0, -1, false)
H.check(text:find('_Working: ', 1, true), 'the answer is still being written:\n' .. text)

--- The number of the view's first line that matches `pattern` (a Lua pattern).
---@param pattern string
---@return integer
local function line_matching(pattern)
  for number, line in ipairs(lines) do
    if line:match(pattern) then
      return number
    end
  end
  H.fail(('no line matching %q in the view:\n%s'):format(pattern, text))
  return 0
end

H.check(vim.tbl_contains(lines, words), 'the model\'s words as written:\n' .. text)
-- The reference where the model's [[1]] stood, as the answer's view shows it; the code under its caption.
local ref = line_matching('^Passwords are checked when a session logs in%. `%(')
local path, first, last = lines[ref]:match('`%((.-):(%d+)%-(%d+)%)`$')
H.check(path, 'the reference names the span:\n' .. text)
local caption = line_matching('^`' .. vim.pesc(('%s:%s-%s'):format(path, first, last)) .. '`$')
H.check(lines[caption + 1]:match('^```+python$'), 'the spliced code is fenced under its caption:\n' .. text)
local file = vim.fn.readfile(H.path(path))
H.equal(lines[caption + 2], file[tonumber(first)], 'the first spliced line is the line on disk')
H.check(caption > ref and caption < line_matching('^' .. vim.pesc(words) .. '$'),
  'the code follows the line citing it:\n' .. text)
