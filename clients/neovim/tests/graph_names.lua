-- Against the real server: a file whose name holds a line break, a bidi override and an escape sequence, in a folder
-- of its own and importing shop/auth.py. Every graph view naming it (the file's own node, its importer's node, the
-- map, its folder, a path from it) is shown, the name on one line escaped as the other views show names
-- (`one_line`), never a forged heading; <CR> on it opens the real file. The raw name made nvim_buf_set_lines refuse
-- the view's lines ("item contains newlines"): the view never opened.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
local hostile = os.getenv('CODELOUPE_TEST_HOSTILE')
H.check(hostile, 'CODELOUPE_TEST_HOSTILE is not set')
local relative = 'odd/' .. hostile
local shown = 'odd/nl\\n### 9. `forged.py`\\nx\\u202e\\x1b[1m.py'
H.setup()
H.ready(H.client(H.open('shop/auth.py')))

--- The graph view once it shows `needle`: every line plain (no escape character, no bidi override, no forged
--- heading), and <CR> on the first line holding `entry` opens the hostile file.
---@param what string
---@param needle string
---@param entry string?
local function check(what, needle, entry)
  local view = H.view('codeloupe://graph', needle, 20000)
  for number, line in ipairs(vim.api.nvim_buf_get_lines(view, 0, -1, false)) do
    H.check(not line:find('[\r\27]') and not line:find('\u{202e}', 1, true) and not line:find('^### 9%.'),
      ('%s: line %d is not one escaped line: %q\n%s'):format(what, number, line, H.text(view)))
  end
  if entry then
    vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
    vim.api.nvim_win_set_cursor(0, { H.buffer_line(view, entry), 0 })
    H.press('<CR>')
    H.equal(vim.api.nvim_buf_get_name(0), H.path(relative), what .. ': <CR> on the name opens the file')
  end
  vim.api.nvim_buf_delete(view, { force = true }) -- the next view starts from an empty buffer
end

-- The file's own node, from its buffer (the view's heading is its name).
H.open(relative)
vim.cmd('Codeloupe graph node')
check('the node of the file', '# ' .. shown, '# ' .. shown)

-- The node of the file it imports: the file among the importers.
H.open('shop/auth.py')
vim.cmd('Codeloupe graph node')
check('the node of shop/auth.py', '- ' .. shown, '- ' .. shown)

-- The map: the file among its community's members.
vim.cmd('Codeloupe graph map')
check('the map', '- ' .. shown, '- ' .. shown)

-- Its folder: the edge out of it, and its files.
vim.cmd('Codeloupe graph node odd')
check('the folder odd', '- ' .. shown .. ' (', '- ' .. shown .. ' (')

-- A path from it (named through the Lua function: a command line holds no line break).
require('codeloupe').graph({ 'path', relative, 'shop/auth.py' })
check('a path from the file', '# Path: ' .. shown .. ' -> shop/auth.py', '1. ' .. shown)
