-- The plugin's pure parts on real data, no server: range conversion, settings, result -> quickfix
-- items, the ask view's citation mapping (followed into the real fixture files), graph trees, completion.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup({ cmd = { 'true' } })

local config = require('codeloupe.config')
local locations = require('codeloupe.locations')

---@param first integer 1-based
---@param last integer 1-based inclusive
---@return lsp.Range
local function span(first, last)
  return { start = { line = first - 1, character = 0 }, ['end'] = { line = last, character = 0 } }
end

-- Ranges: a..b travels as {a-1:0, b:0}; a range ending mid-line keeps its end line.
H.equal({ locations.lines(span(10, 24)) }, { 10, 24 }, 'span 10-24')
H.equal({ locations.lines(span(1, 1)) }, { 1, 1 }, 'span 1-1')
H.equal({ locations.lines({ start = { line = 4, character = 2 }, ['end'] = { line = 4, character = 9 } }) }, { 5, 5 },
  'a range inside one line')
H.equal({ locations.lines({ start = { line = 4, character = 0 }, ['end'] = { line = 6, character = 3 } }) }, { 5, 7 },
  'a range ending inside a line')

-- Settings: snake_case and camelCase both reach the server as camelCase.
H.equal(config.server_settings({ embed_provider = 'none', chatModel = 'm', chat_timeout_s = 5 }),
  { embedProvider = 'none', chatModel = 'm', chatTimeoutS = 5 }, 'server settings')
H.equal(config.merge({ cmd = { 'x' } }).cmd, { 'x' }, 'cmd replaces the default list')
-- Options setup() does not take: it raised a Lua error (a traceback that stopped the user's init.lua there, the
-- server never started) for some, and said nothing for a misspelt name, a wrong-typed boolean or a bad search limit,
-- which were then ignored or sent as they were. Now one message names each, and the rest of the options apply.
H.notifications = {}
require('codeloupe').setup({ cmd = { 'true' }, picker = 'fzf', settings = 'none', serach = { limit = 3 },
  search = { limit = 'ten', docs = 'both', limt = 2 }, codelens = 'no', ask = { agents = 'yes' }, layout = 'tab' })
H.equal(#H.notifications, 1, 'notifications for the bad options')
local said = H.notifications[1].msg
for _, expected in ipairs({ "picker takes one of 'auto', 'telescope', 'select', not 'fzf'", 'settings takes a table',
  'unknown option serach', 'search.limit takes a whole number', 'unknown option search.limt',
  'codelens takes true or false', 'ask.agents takes true or false or nil' }) do
  H.check(said:find(expected, 1, true), ('the message should say %q:\n%s'):format(expected, said))
end
H.equal(H.notifications[1].level, vim.log.levels.WARN, 'level of the bad options message')
H.equal({ config.options.picker, config.options.settings, config.options.serach, config.options.search,
  config.options.codelens, config.options.ask.agents, config.options.layout },
  { 'auto', {}, nil, { docs = 'both' }, true, nil, 'tab' }, 'options after bad ones: defaults, and the good ones')
H.equal(select(2, config.merge({ cmd = { 'x' }, search = { limit = 5 }, ask = { agents = false } })), {},
  'problems with good options')
H.notifications = {}
H.setup({ cmd = { 'true' } })

-- Search results -> quickfix items: CORE then RELATED, every chunk, label and anchor line in the text.
local auth_uri = vim.uri_from_fname(H.path('shop/auth.py'))
local sessions_uri = vim.uri_from_fname(H.path('shop/sessions.py'))
local verify_line = H.line_of('shop/auth.py', 'def verify_password')
local verify_end = verify_line + 2
local result = {
  query = 'verify password',
  core = { {
    uri = auth_uri, path = 'shop/auth.py', rank = 1, score = 0.9, why = 'bm25 #1', symbols = { 'verify_password' },
    location = { uri = auth_uri, range = span(verify_line, verify_end) },
    chunks = { {
      location = { uri = auth_uri, range = span(verify_line, verify_end) },
      breadcrumb = 'shop/auth.py > def verify_password(password, salt, expected)',
      text = table.concat(vim.list_slice(vim.fn.readfile(H.path('shop/auth.py')), verify_line, verify_end), '\n'),
      snippet = { text = 'def verify_password(...):\n    """Compare..."""', startLine = verify_line - 1, anchorLine = verify_line },
    } },
  } },
  related = { {
    uri = sessions_uri, path = 'shop/sessions.py', rank = 2, score = 0.4, why = 'graph', symbols = {},
    location = { uri = sessions_uri, range = span(2, 2) },
    chunks = {},
  } },
}
local items = require('codeloupe.search').items(result)
H.equal(#items, 2, 'one item per chunk, and one for a file without chunks')
-- The item opens at the snippet's anchor line (0-based verify_line is the docstring line below the def).
H.equal({ items[1].filename, items[1].lnum, items[1].end_lnum }, { H.path('shop/auth.py'), verify_line + 1, verify_end },
  'core item location')
H.equal(items[1].text, 'CORE def verify_password(password, salt, expected) | """Compare..."""', 'core item text')
-- A server that names the definition holding the anchor labels the item with it; "" means no definition.
result.core[1].chunks[1].snippet.anchorSymbol = 'verify_password'
H.equal(require('codeloupe.search').items(result)[1].text, 'CORE verify_password | """Compare..."""', 'anchor label')
result.core[1].chunks[1].snippet.anchorSymbol = ''
H.equal(require('codeloupe.search').items(result)[1].text, 'CORE | """Compare..."""', 'no definition: no label')
result.core[1].chunks[1].snippet.anchorSymbol = nil
H.equal({ items[2].filename, items[2].lnum }, { H.path('shop/sessions.py'), 2 }, 'related item location')
H.check(items[2].text:find('^RELATED'), 'related item text: ' .. items[2].text)

-- Ask: the answer's parts (docs/protocol.md). A code part's lines open their lines on disk; a ref opens its span;
-- the "Cited" list and the uncited candidates open too; the engine's own list of uncited files is left out.
local auth_lines = vim.fn.readfile(H.path('shop/auth.py'))
local cited_text = table.concat(vim.list_slice(auth_lines, verify_line, verify_end), '\n')
local ask = require('codeloupe.ask')
local verify_location = { uri = auth_uri, range = span(verify_line, verify_end) }
local verify_span = { path = 'shop/auth.py', startLine = verify_line, endLine = verify_end, location = verify_location }
local answer = {
  answer = 'the same answer as markdown, which the view does not read',
  parts = {
    { kind = 'prose', text = 'Passwords are checked by `verify_password` ' },
    vim.tbl_extend('force', verify_span, { kind = 'ref', text = ('(shop/auth.py:%d-%d)'):format(verify_line, verify_end) }),
    { kind = 'prose', text = ', which hashes and compares:\n' },
    vim.tbl_extend('force', verify_span, { kind = 'code', text = cited_text .. '\n', language = 'python' }),
    { kind = 'prose', text = '\nSessions call it on login.' },
    { kind = 'heading', text = 'Also retrieved, not cited' },
    { kind = 'note', text = '- ' },
    { kind = 'ref', text = 'shop/sessions.py:2-2', path = 'shop/sessions.py', startLine = 2, endLine = 2,
      location = { uri = sessions_uri, range = span(2, 2) } },
    { kind = 'note', text = '\n' },
  },
  citations = { {
    k = 1, path = 'shop/auth.py', startLine = verify_line, endLine = verify_end, text = cited_text,
    location = verify_location,
  } },
  uncited = result.related,
  abstained = false,
  fallback = vim.NIL,
  bundle = result,
}
local doc = ask.render('how are passwords checked?', answer, H.root)
local view = require('codeloupe.view')
local origin = vim.api.nvim_get_current_win()
local buf = view.show({ name = ask.buffer_name, filetype = 'markdown', layout = 'vsplit', lines = doc.lines,
  targets = doc.targets })

local return_line = H.buffer_line(buf, 'return hmac.compare_digest')
vim.api.nvim_win_set_cursor(0, { return_line, 4 })
H.press('<CR>')
local name, line = H.where()
H.equal(name, H.path('shop/auth.py'), 'followed code line opens the cited file')
H.equal(line, H.line_of('shop/auth.py', 'return hmac.compare_digest'), 'followed code line opens its own line')
H.equal(vim.api.nvim_get_current_win(), origin, 'spans open in the window the answer was asked from')

vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
local prose = H.buffer_line(buf, 'Passwords are checked by `verify_password` `(shop/auth.py:')
vim.api.nvim_win_set_cursor(0, { prose, 0 })
H.press('gd')
H.equal({ H.where() }, { H.path('shop/auth.py'), verify_line }, 'gd on a line with a ref opens its span')
H.check(not H.text(buf):find('Also retrieved', 1, true), "the engine's list of uncited files is left out:\n" .. H.text(buf))

vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
vim.api.nvim_win_set_cursor(0, { H.buffer_line(buf, '`shop/sessions.py:2-2`'), 0 })
H.press('<CR>')
H.equal({ H.where() }, { H.path('shop/sessions.py'), 2 }, 'an uncited candidate opens')
H.check(H.text(buf):find('## Not cited (1 file)', 1, true), 'uncited section:\n' .. H.text(buf))

-- A float view closes when a span is followed; the span opens in the window below it.
local float_origin = vim.api.nvim_get_current_win()
local float_buf, float_win = view.show({ name = 'codeloupe://test-float', filetype = 'markdown', layout = 'float',
  lines = { 'verify', 'nothing here' }, targets = { [1] = { filename = H.path('shop/auth.py'), lnum = verify_line } } })
H.check(vim.api.nvim_win_get_config(float_win).relative ~= '', 'layout float opens a floating window')
vim.api.nvim_win_set_cursor(float_win, { 2, 0 })
H.press('<CR>')
H.check(H.notified('nothing to open on this line'), 'a line without a target says so')
H.equal(vim.api.nvim_get_current_win(), float_win, 'the float stays open on a line without a target')
vim.api.nvim_win_set_cursor(float_win, { 1, 0 })
H.press('<CR>')
H.check(not vim.api.nvim_win_is_valid(float_win), 'the float closed')
H.equal({ vim.api.nvim_get_current_win(), H.where() }, { float_origin, H.path('shop/auth.py'), verify_line },
  'followed from a float')
vim.api.nvim_buf_delete(float_buf, { force = true })

-- A fallback answer renders the bundle itself: CORE code verbatim, every span followable.
local fallback = ask.render('q', { fallback = 'no chat model configured', bundle = result, citations = {} }, H.root)
local text = table.concat(fallback.lines, '\n')
H.check(text:find('no chat model configured', 1, true) and text:find('## Related (1 file)', 1, true),
  'fallback render:\n' .. text)
local code_line
for number, rendered in ipairs(fallback.lines) do
  if rendered:find('return hmac.compare_digest', 1, true) then
    code_line = number
  end
end
H.check(code_line, 'the fallback shows CORE code:\n' .. text)
H.equal(fallback.lines[code_line], auth_lines[H.line_of('shop/auth.py', 'return hmac.compare_digest')],
  'CORE code is shown verbatim')
H.equal(fallback.targets[code_line].lnum, H.line_of('shop/auth.py', 'return hmac.compare_digest'),
  'a fallback code line opens its own line')

-- Prose is plain text with its control and bidi characters escaped as the server escapes them (`\u202e`), a CRLF a
-- line break; two refs on one line each open their own span, the one nearest the cursor.
local sessions_ref = { kind = 'ref', text = '(shop/sessions.py:2-2)', path = 'shop/sessions.py', startLine = 2,
  endLine = 2, location = { uri = sessions_uri, range = span(2, 2) } }
local shown = ask.render('who is admin?', {
  parts = {
    { kind = 'prose', text = 'Admin \u{202e}rights\27[2J come from ' },
    vim.tbl_extend('force', verify_span, { kind = 'ref', text = ('(shop/auth.py:%d-%d)'):format(verify_line, verify_end) }),
    { kind = 'prose', text = ' and ' }, sessions_ref, { kind = 'prose', text = '.\r\nNext line.' },
  },
  citations = {}, uncited = {}, abstained = false, fallback = vim.NIL, bundle = { core = {}, related = {} },
}, H.root)
local two_refs = ('Admin \\u202erights\\x1b[2J come from `(shop/auth.py:%d-%d)` and `(shop/sessions.py:2-2)`.')
  :format(verify_line, verify_end)
H.equal(vim.list_slice(shown.lines, 3, 4), { two_refs, 'Next line.' }, 'prose escaped, CRLF a break:\n'
  .. table.concat(shown.lines, '\n'))
local nearest = shown.targets[3]
H.equal(type(nearest), 'function', 'a line with two refs opens the one nearest the cursor')
H.equal({ nearest(0).filename, nearest(0).lnum }, { H.path('shop/auth.py'), verify_line }, 'the first ref')
H.equal({ nearest(#two_refs - 1).filename, nearest(#two_refs - 1).lnum }, { H.path('shop/sessions.py'), 2 },
  'the second ref')
H.equal(shown.targets[4], nil, 'a line of prose alone opens nothing')

-- An abstained answer's parts end with the bundle (codeloupe.ask.render.bundle_parts), a heading naming each CORE
-- file: one named as the engine's footer heading is a file, and the view goes on past it to the file's code.
local abstained = ask.render('q', {
  parts = {
    { kind = 'note', text = 'The retrieved code does not answer this question.\n\n' },
    { kind = 'heading', text = 'Core files' },
    { kind = 'heading', text = 'Also retrieved, not cited' },
    vim.tbl_extend('force', verify_span, { kind = 'code', text = cited_text .. '\n', language = 'python' }),
  },
  citations = {}, uncited = {}, abstained = true, fallback = vim.NIL, bundle = { core = {}, related = {} },
}, H.root)
local abstained_text = table.concat(abstained.lines, '\n')
H.check(abstained_text:find('### Also retrieved, not cited', 1, true)
  and abstained_text:find('return hmac.compare_digest', 1, true), 'an abstained answer is shown whole:\n'
  .. abstained_text)

-- Graph path trees: hops with carriers open the use site.
local graph = require('codeloupe.graph')
local tree = graph.render('path', {
  from = 'shop/cart.py', to = 'shop/auth.py', found = true, meetsInMiddle = false, note = '',
  hops = {
    { source = 'shop/cart.py', target = 'shop/sessions.py', kind = 'import', carriers = { 'SessionStore' } },
    { source = 'shop/sessions.py', target = 'shop/auth.py', kind = 'call', carriers = { 'verify_password' },
      use = { uri = sessions_uri, range = span(12, 12) }, definition = { uri = auth_uri, range = span(verify_line, verify_end) } },
  },
}, H.root)
local tree_text = table.concat(tree.lines, '\n')
H.check(tree_text:find('2. shop/sessions.py -[call]-> shop/auth.py', 1, true), 'path tree:\n' .. tree_text)
H.check(tree_text:find('carriers: verify_password', 1, true), 'carriers listed:\n' .. tree_text)
local hop_line
for number, rendered in ipairs(tree.lines) do
  if rendered:find('^2%. ') then
    hop_line = number
  end
end
H.equal({ tree.targets[hop_line].filename, tree.targets[hop_line].lnum }, { H.path('shop/sessions.py'), 12 },
  'a hop opens its use site')
H.equal(tree.targets[1], nil, 'the title line opens nothing')

-- :Codeloupe completion.
local commands = require('codeloupe.commands')
H.equal(commands.complete('s', 'Codeloupe s'), { 'search', 'status' }, 'subcommand completion')
H.equal(commands.complete('i', 'Codeloupe i'), { 'issue' }, 'issue completion')
H.equal(commands.complete('', 'Codeloupe graph '), { 'map', 'node', 'path' }, 'graph mode completion')

-- A subcommand that takes no argument refuses words after it (they were dropped without a word).
for _, subcommand in ipairs({ 'reindex', 'status', 'related', 'issue' }) do
  vim.cmd('Codeloupe ' .. subcommand .. ' extra words')
  local refusal = ('^codeloupe: %s takes no arguments %%(got "extra words"%%)$'):format(subcommand)
  H.check(H.notified(refusal, vim.log.levels.ERROR), subcommand .. ' with extra words says they are not taken')
end

-- :Codeloupe status: a folder's lines name what was skipped for its content, counted by reason.
local described = require('codeloupe.index').describe_folder({
  root = '/w', state = 'ready', files = 3, chunks = 5, symbols = 2, vectors = { done = 0, total = 5 },
  provider = 'none', model = '', languages = { python = 3 }, skipped = { generated = 2, binary = 1 },
})
H.equal(described[#described], '  skipped for their content: binary 1, generated 2 (`codeloupe stats --skipped` lists them)',
  'status lists skips by reason')
local nothing_skipped = require('codeloupe.index').describe_folder({ root = '/w', state = 'ready', skipped = {} })
H.check(not table.concat(nothing_skipped, '\n'):find('skipped', 1, true), 'no skip line when nothing was skipped')
