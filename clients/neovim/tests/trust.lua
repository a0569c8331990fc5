-- Against the real server: the workspace's settings file is trusted or denied through vim.secure, and the
-- server applies or ignores its endpoint/resource settings accordingly (CODELOUPE_TEST_TRUST=allow|deny); with
-- no codeloupe settings in its files (none) nothing is asked and :Codeloupe status says there is nothing to trust;
-- settings in a `[tool."codeloupe"]` table (quoted), which the plugin's reading of pyproject.toml missed (nothing
-- was asked and the server ignored them), are asked about as the table's usual spelling is: trusted, they apply.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
local decision = os.getenv('CODELOUPE_TEST_TRUST')
local settings_file = vim.fs.joinpath(H.root, '.codeloupe.toml')

-- The user's earlier answer to vim.secure's prompt (the prompt itself needs a UI).
if decision == 'allow' then
  vim.cmd.edit(vim.fn.fnameescape(settings_file))
  H.check(vim.secure.trust({ action = 'allow', bufnr = 0 }), 'allow the settings file')
  vim.cmd('bwipeout')
elseif decision == 'quoted' then
  vim.cmd.edit(vim.fn.fnameescape(vim.fs.joinpath(H.root, 'pyproject.toml')))
  H.check(vim.secure.trust({ action = 'allow', bufnr = 0 }), 'allow pyproject.toml')
  vim.cmd('bwipeout')
elseif decision == 'deny' then
  H.check(vim.secure.trust({ action = 'deny', path = settings_file }), 'deny the settings file')
end

local shown = {}
vim.lsp.handlers['window/showMessage'] = function(_, params)
  shown[#shown + 1] = params.message
end

H.setup()
H.ready(H.client(H.open('shop/auth.py')))
local warnings = vim.tbl_filter(function(message)
  return message:find('ignoring settings', 1, true) ~= nil
end, shown)
if decision ~= 'deny' then
  H.equal(warnings, {}, 'a trusted settings file, or none, applies without a warning')
else
  H.equal(#warnings, 1, 'one warning for the denied settings file: ' .. vim.inspect(shown))
  H.check(warnings[1]:find('embed_threads', 1, true), 'the warning names the ignored key: ' .. warnings[1])
  H.check(warnings[1]:find('codeloupe trust', 1, true), 'the warning says how to trust: ' .. warnings[1])
end

-- :Codeloupe status says which it is either way: an untrusted folder said nothing, where a trusted one said
-- ", trusted", and the user could not tell it from a server that does not know.
vim.cmd('Codeloupe status')
H.wait(function()
  return H.notified('^codeloupe status')
end, 10000, ':Codeloupe status')
local status = H.notified('^codeloupe status')
local how = ('codeloupe trust %s` lets them'):format(vim.fn.shellescape(H.root))
if decision == 'allow' or decision == 'quoted' then
  H.check(status:find(H.root .. ': ready, trusted\n', 1, true), 'status says the folder is trusted:\n' .. status)
  H.check(not status:find('untrusted', 1, true), 'a trusted folder is not called untrusted:\n' .. status)
elseif decision == 'none' then
  -- It said "untrusted" and what trusting would let its settings files set, for a folder with none to trust.
  H.check(status:find(H.root .. ': ready, no workspace settings\n', 1, true), 'nothing to trust:\n' .. status)
  H.check(not status:find('untrusted', 1, true) and not status:find('codeloupe trust', 1, true),
    'no word of trusting it:\n' .. status)
else
  H.check(status:find(H.root .. ': ready, untrusted\n', 1, true), 'status says the folder is untrusted:\n' .. status)
  H.check(status:find('its own settings files (.codeloupe.toml) may not set endpoints, keys, models or resource '
    .. 'settings; `' .. how, 1, true), 'status says which files, what trusting it would allow, and how:\n' .. status)
end
