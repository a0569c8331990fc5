-- A file whose name holds a line break, a bidi override and an escape sequence, cited by the scripted model:
-- every line the plugin writes itself (the Cited and Not cited lists, the fallback bundle's headings, captions
-- and span lines) names it on one line, escaped as the server's captions are, and <CR> there opens the file.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
local chat_url = os.getenv('CODELOUPE_TEST_CHAT_URL')
local hostile = os.getenv('CODELOUPE_TEST_HOSTILE')
H.check(chat_url and hostile, 'CODELOUPE_TEST_CHAT_URL / CODELOUPE_TEST_HOSTILE are not set')
H.setup({
  settings = { embed_provider = 'none', chat_base_url = chat_url, chat_model = 'scripted' },
  ask = { agents = false },
})
local ask = require('codeloupe.ask')
local shown = 'nl\\n### 9. `forged.py`\\nx\\u202e\\x1b[1m.py'

--- No line of `lines` is the forged heading, and the line naming the hostile file shows it escaped and opens it.
local function check_view(lines, targets, what)
  local naming = 0
  for number, line in ipairs(lines) do
    H.check(not line:find('forged', 1, true) or line:find(shown, 1, true),
      ('%s: line %d names the file on two lines: %q\n%s'):format(what, number, line, table.concat(lines, '\n')))
    if line:find(shown, 1, true) then
      naming = naming + 1
      local target = targets[number]
      if type(target) == 'function' then
        target = target(0)
      end
      H.check(target and target.filename == H.path(hostile),
        ('%s: line %d does not open the file: %q -> %s'):format(what, number, line, vim.inspect(target)))
    end
  end
  H.check(naming > 0, what .. ' never names the file:\n' .. table.concat(lines, '\n'))
end

local client = H.client(H.open('shop/cart.py'))
H.ready(client)

vim.cmd('Codeloupe ask newline_named_thing')
local view = H.view('codeloupe://ask', '## Not cited', 30000)
H.check(H.text(view):find('- [1] ``' .. shown, 1, true), 'the Cited entry is the escaped name:\n' .. H.text(view))
local cited = H.buffer_line(view, '- [1] `')
vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
vim.api.nvim_win_set_cursor(0, { cited, 0 })
H.press('<CR>')
H.equal({ H.where() }, { H.path(hostile), 1 }, '<CR> on the Cited entry')

-- The bundle as the fallback shows it (no model answered): the real server's result, rendered by the view.
local response = client:request_sync('codeloupe/search', require('codeloupe.search').params('newline_named_thing'), 20000)
H.check(response and response.result, 'codeloupe.search answered: ' .. vim.inspect(response))
local doc = ask.render('q', { fallback = 'no chat model configured', bundle = response.result })
check_view(doc.lines, doc.targets, 'the fallback bundle')
-- The model's answer again, with the file among the candidates it did not cite.
doc = ask.render('q', { parts = { { kind = 'prose', text = 'Nothing cited.' } }, citations = {}, uncited = response.result.core })
check_view(doc.lines, doc.targets, 'the Not cited list')
