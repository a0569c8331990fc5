-- Against the real server, on files whose lines end in "\r\n", a lone "\r", a form feed or U+2028: the lines
-- the plugin shows and opens are the server's (a line ends at "\n", "\r\n" or a lone "\r" only). The expected
-- lines of each file come from the Python tests' own rule ($CODELOUPE_TEST_LINES: path -> lines).
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup({})

local expected = vim.json.decode(os.getenv('CODELOUPE_TEST_LINES'))
local client = H.client(H.open('README.md'))
H.ready(client)

local search = require('codeloupe.search')
local ask = require('codeloupe.ask')
local graph = require('codeloupe.graph')

--- The expected text of 1-based line `lnum` of the workspace file `filename`.
local function line_at(filename, lnum)
  local relative = filename:sub(#H.root + 2)
  local lines = expected[relative]
  H.check(lines, 'a file with odd line breaks: ' .. filename)
  return lines[lnum]
end

local checked = 0
for _, name in ipairs({ 'after_separator', 'after_crlf', 'after_lone_cr', 'jsAfterPara' }) do
  local response = client:request_sync('codeloupe/search', { query = name }, 20000)
  H.check(response and not response.err, 'codeloupe/search failed: ' .. vim.inspect(response))
  local result = response.result
  local best = result.core[1]
  H.check(best and expected[best.path], name .. ' finds its file first: ' .. vim.inspect(result))

  -- Search items: the text after the label is the anchor line, the one the item opens.
  for _, item in ipairs(search.items(result)) do
    if item.user_data.path == best.path then
      local want = vim.trim(line_at(item.filename, item.lnum))
      if want ~= '' then
        H.check(vim.endswith(item.text, ' | ' .. want),
          ('%s: the item at line %d shows that line (%q), not %q'):format(name, item.lnum, want, item.text))
        checked = checked + 1
      end
    end
  end

  -- The ask view's fallback shows CORE code line by line; each line opens its own line on disk.
  local doc = ask.render(name, { fallback = 'no chat model configured', bundle = result, citations = {} }, H.root)
  local code_lines, fenced = 0, false
  for number, rendered in ipairs(doc.lines) do
    local target = doc.targets[number]
    if rendered:find('^```') then
      fenced = not fenced
    elseif fenced and target.filename == H.path(best.path) then
      H.equal(rendered, line_at(target.filename, target.lnum), ('%s: ask view line %d'):format(name, number))
      code_lines = code_lines + 1
    end
  end
  H.check(code_lines > 0, name .. ': the ask view shows code:\n' .. table.concat(doc.lines, '\n'))

  -- A graph hop's code (a chunk as read from disk), likewise line by line.
  local chunk = best.chunks[1]
  local tree = graph.render('path', {
    from = best.path, to = best.path, found = true, meetsInMiddle = false, note = '',
    hops = { { source = best.path, target = best.path, kind = 'call', carriers = { name },
      use = chunk.location, useCode = { location = chunk.location, text = chunk.text } } },
  }, H.root)
  local hop_lines = 0
  for number, rendered in ipairs(tree.lines) do
    local code = rendered:match('^     | (.*)$')
    if code then
      H.equal(code, line_at(tree.targets[number].filename, tree.targets[number].lnum), ('%s: graph line %d'):format(name, number))
      hop_lines = hop_lines + 1
    end
  end
  H.check(hop_lines > 0, name .. ': the hop shows its code:\n' .. table.concat(tree.lines, '\n'))
end
H.check(checked >= 4, 'search items were checked: ' .. checked)
