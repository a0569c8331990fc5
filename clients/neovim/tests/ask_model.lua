-- Against the real server and the scripted chat model (tests/chat_server.py): the narrated answer's
-- spliced code and its "Cited" list open the cited lines, which match the file on disk.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.scripted_ask()

vim.cmd('Codeloupe ask how are passwords verified at login')
local view
H.wait(function()
  view = vim.fn.bufnr('codeloupe://ask')
  return view ~= -1 and H.text(view):find('## Not cited', 1, true) ~= nil
end, 30000, function()
  return 'the narrated answer (view: ' .. (view ~= -1 and H.text(view) or 'none') .. ')'
end)
local text = H.text(view)
H.check(not text:find('No narrated answer', 1, true), 'the model answered:\n' .. text)
H.check(text:find('Passwords are checked when a session logs in.', 1, true), 'the scripted prose is shown:\n' .. text)
H.check(not text:find('INVENTED', 1, true), 'code the model wrote is never shown:\n' .. text)
-- What the answer did not cite is listed once, by the view (each line opens its file), not also by the engine.
H.check(not text:find('Also retrieved, not cited', 1, true), 'the uncited files are listed once:\n' .. text)
local fences = #vim.tbl_filter(function(line)
  return line:match('^```') ~= nil
end, vim.api.nvim_buf_get_lines(view, 0, -1, false))
H.equal(fences, 2, 'one fenced block, the spliced span:\n' .. text)

local cited = H.buffer_line(view, '- [1] `')
local path, first = vim.api.nvim_buf_get_lines(view, cited - 1, cited, false)[1]:match('^%- %[1%] `(.-):(%d+)%-%d+`')
H.check(path, 'the Cited list names the span:\n' .. text)
first = tonumber(first)

-- The first code line of the spliced block opens its own line, and it is the line on disk.
local fence
for number, line in ipairs(vim.api.nvim_buf_get_lines(view, 0, -1, false)) do
  if line:match('^```') then
    fence = number
    break
  end
end
H.check(fence, 'the answer splices the cited code in a fenced block:\n' .. text)
local code = vim.api.nvim_buf_get_lines(view, fence, fence + 1, false)[1]
vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
vim.api.nvim_win_set_cursor(0, { fence + 1, 0 })
H.press('<CR>')
local name, line = H.where()
H.equal({ name, line }, { H.path(path), first }, 'the first spliced line opens the cited span start')
H.equal(vim.api.nvim_get_current_line(), code, 'the spliced code is the line on disk')

vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
vim.api.nvim_win_set_cursor(0, { cited, 0 })
H.press('gd')
H.equal({ H.where() }, { H.path(path), first }, 'gd on the Cited entry')
