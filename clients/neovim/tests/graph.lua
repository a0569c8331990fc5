-- Against the real server: :Codeloupe graph node / path / map trees and <CR> on them.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup()

local auth = H.open('shop/auth.py')
H.ready(H.client(auth))

---@param needle string
---@return integer
local function graph_view(needle)
  local buf
  H.wait(function()
    buf = vim.fn.bufnr('codeloupe://graph')
    return buf ~= -1 and H.text(buf):find(needle, 1, true) ~= nil
  end, 20000, 'the graph view to show ' .. needle)
  return buf
end

-- node without a name: the current file.
vim.cmd('Codeloupe graph node')
local view = graph_view('# shop/auth.py')
local text = H.text(view)
H.check(text:find('## Importers (', 1, true), 'node view sections:\n' .. text)
local importer = H.buffer_line(view, '- shop/sessions.py')
vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
vim.api.nvim_win_set_cursor(0, { importer, 0 })
H.press('<CR>')
H.equal(vim.api.nvim_buf_get_name(0), H.path('shop/sessions.py'), '<CR> on an importer opens it')

vim.cmd('Codeloupe graph path shop/cart.py shop/auth.py')
view = graph_view('# Path: shop/cart.py -> shop/auth.py')
text = H.text(view)
H.check(text:find('found', 1, true) and text:find('shop/sessions.py', 1, true), 'the path passes sessions.py:\n' .. text)

vim.cmd('Codeloupe graph')
view = graph_view('# Graph:')
text = H.text(view)
for _, path in ipairs({ 'shop/auth.py', 'shop/sessions.py', 'shop/cart.py', 'web/session.js', 'web/routes.js' }) do
  H.check(text:find('- ' .. path, 1, true), 'the map lists ' .. path .. ':\n' .. text)
end
