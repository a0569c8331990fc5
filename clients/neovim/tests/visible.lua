-- codeloupe.lines.visible on the text in $CODELOUPE_TEST_VISIBLE_IN, line by line, written to
-- $CODELOUPE_TEST_VISIBLE_OUT: tests/test_neovim_client.py holds it to the engine's own `visible`.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup({ cmd = { 'true' } })

local text_lines = require('codeloupe.lines')
local input = assert(io.open(os.getenv('CODELOUPE_TEST_VISIBLE_IN'), 'rb'))
local lines = text_lines.split(input:read('*a'))
input:close()
local output = assert(io.open(os.getenv('CODELOUPE_TEST_VISIBLE_OUT'), 'wb'))
output:write(table.concat(vim.tbl_map(text_lines.visible, lines), '\n'))
output:close()
