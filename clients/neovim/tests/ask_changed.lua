-- Against the real server and the scripted chat model, which changes the cited file on disk as it answers (lines
-- added above the span, after the index read it): the spliced code is the span found again by its content, and the
-- view says so under its caption, as the answer's markdown does.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.scripted_ask({ flows = false })

-- The server must hear of the change only after the answer: Neovim's file watcher (inotifywait where installed, else
-- a watch on every folder) reports it, and a re-index landing before the splice left no change to say. What the
-- watcher reports is held until the answer is in the view and the watcher has reported the file, then passed on.
local client = H.client(vim.api.nvim_get_current_buf())
local held = {}
local notify = client.notify
client.notify = function(self, method, params)
  if method ~= 'workspace/didChangeWatchedFiles' then
    return notify(self, method, params)
  end
  held[#held + 1] = params
  return true
end
local function reported(path)
  for _, params in ipairs(held) do
    for _, change in ipairs(params.changes) do
      if change.uri == vim.uri_from_fname(path) then
        return true
      end
    end
  end
end

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
H.wait(function()
  return reported(H.path(path))
end, 10000, 'the file watcher to report ' .. path)
client.notify = notify
for _, params in ipairs(held) do
  client:notify('workspace/didChangeWatchedFiles', params)
end
vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
vim.api.nvim_win_set_cursor(0, { note, 0 })
H.press('<CR>')
H.equal({ H.where() }, { H.path(path), tonumber(first) }, '<CR> on the note opens the span')
