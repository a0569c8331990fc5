-- Against the real server: code lenses appear, the "used in" lens lists its locations in quickfix
-- (codeloupe.showLocations handled client-side), and K shows the neighbours markdown.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup()

local auth = H.open('shop/auth.py')
H.ready(H.client(auth))
local verify_line = H.line_of('shop/auth.py', 'def verify_password')

local function lens_on(line)
  for _, lens in ipairs(vim.lsp.codelens.get(auth)) do
    if lens.range.start.line == line - 1 and lens.command and lens.command.command == 'codeloupe.showLocations' then
      return lens
    end
  end
end

-- Lenses are requested on attach and again when indexing ends; BufEnter refreshes them as well.
H.wait(function()
  if not lens_on(verify_line) then
    vim.cmd('doautocmd BufEnter')
    return false
  end
  return true
end, 20000, function()
  return 'a codeloupe lens on def verify_password (lenses: ' .. vim.inspect(vim.lsp.codelens.get(auth)) .. ')'
end)
local lens = lens_on(verify_line)
H.check(lens.command.title:find('1 file', 1, true), 'the lens counts its users: ' .. lens.command.title)

vim.api.nvim_win_set_cursor(0, { verify_line, 0 })
vim.lsp.codelens.run()
H.wait(function()
  return #vim.fn.getqflist() > 0
end, 10000, 'the lens locations in quickfix')
local use_line = H.line_of('shop/sessions.py', 'verify_password(password')
local listed = false
for _, item in ipairs(vim.fn.getqflist()) do
  if vim.api.nvim_buf_get_name(item.bufnr) == H.path('shop/sessions.py') and item.lnum == use_line then
    listed = true
    H.check(item.text:find('verify_password', 1, true), 'the item shows the line: ' .. item.text)
  end
end
H.check(listed, ('the use at shop/sessions.py:%d is listed: %s'):format(use_line, vim.inspect(vim.fn.getqflist())))

-- K: the server's neighbours markdown in a float.
vim.cmd('cclose')
vim.api.nvim_set_current_buf(auth)
vim.api.nvim_win_set_cursor(0, { verify_line, 6 })
local float_text = H.hover()
H.check(float_text:find('shop/sessions.py', 1, true), 'hover lists the importer shop/sessions.py:\n' .. float_text)
-- The definition's doc line reads as written: Neovim's float shows markdown's backslash escapes as they are.
H.check(float_text:find('stored hash (in constant time, via hmac_compare).', 1, true),
  'hover shows the doc line as written:\n' .. float_text)

-- A second setup() with `codelens = false` takes effect in buffers attached before it: no more refreshes on
-- BufEnter / BufWritePost, and the lenses shown are gone.
vim.cmd('silent! fclose!')
local refreshes = 0
local refresh = vim.lsp.codelens.refresh
vim.lsp.codelens.refresh = function(...)
  refreshes = refreshes + 1
  return refresh(...)
end
require('codeloupe').setup({ cmd = H.cmd, settings = { embed_provider = 'none' }, codelens = false })
H.equal(#vim.lsp.codelens.get(auth), 0, 'lenses shown after setup({ codelens = false })')
vim.cmd.edit(vim.fn.fnameescape(H.path('shop/cart.py')))
vim.api.nvim_set_current_buf(auth)
vim.cmd('silent write')
vim.wait(300)
H.equal(refreshes, 0, 'lens refreshes in an attached buffer after setup({ codelens = false })')
