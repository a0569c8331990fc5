-- Against the real server: `:Codeloupe related` in a file whose name holds a line break, a bidi override and an
-- escape sequence, the only file of its language (so nothing is related). The notification saying so named the file
-- raw: three lines, the second a forged heading, the rest reordered by the override. It names it on one line,
-- escaped as the quickfix title and the views do (`one_line`).
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
local hostile = os.getenv('CODELOUPE_TEST_HOSTILE')
H.check(hostile, 'CODELOUPE_TEST_HOSTILE is not set')
H.setup()
H.ready(H.client(H.open(hostile)))

vim.cmd('Codeloupe related')
H.wait(function()
  return H.notified('nothing found', vim.log.levels.WARN)
end, 20000, 'the notification that nothing is related')
local message = H.notified('nothing found', vim.log.levels.WARN)
H.check(not message:find('[\n\r\27]') and not message:find('\u{202e}', 1, true),
  'the notification is one escaped line: ' .. vim.inspect(message))
H.check(message:find('related to nl\\n### 9. `forged.rb`\\nx\\u202e\\x1b[1m.rb:1-1', 1, true),
  'the notification names the file escaped: ' .. message)
