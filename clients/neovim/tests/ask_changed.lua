-- Against the real server and the scripted chat model, which changes the cited file on disk as it answers (lines
-- added above the span, after the index read it): the spliced code is the span found again by its content, and the
-- view says so under its caption, as the answer's markdown does.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.scripted_ask({ flows = false })

vim.cmd('Codeloupe ask how are passwords verified at login')
local view = H.view('codeloupe://ask', '## Not cited', 30000)
local text = H.text(view)
local lines = vim.api.nvim_buf_get_lines(view, 0, -1, false)
H.check(not text:find('No narrated answer', 1, true), 'the model answered:\n' .. text)

local note = H.buffer_line(view, '> (changed on disk since indexing: lines re-located)')
local path, first = lines[note - 1]:match('^`(.-):(%d+)%-%d+`$')
H.equal(path, 'shop/auth.py', 'the note sits under the caption of the re-located code')
H.check(lines[note + 1]:match('^```+python$'), 'the code follows the note:\n' .. text)
local file = vim.fn.readfile(H.path(path))
H.equal(file[1], '# two lines the index has not seen,', 'the file changed on disk')
H.equal(lines[note + 2], file[tonumber(first)], 'the first spliced line is that line of the changed file')
vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
vim.api.nvim_win_set_cursor(0, { note, 0 })
H.press('<CR>')
H.equal({ H.where() }, { H.path(path), tonumber(first) }, '<CR> on the note opens the span')
