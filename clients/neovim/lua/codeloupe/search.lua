--- `:Codeloupe search`: results in Telescope, vim.ui.select, or the quickfix list.
local config = require('codeloupe.config')
local indexdoc = require('codeloupe.indexdoc')
local text_lines = require('codeloupe.lines')
local locations = require('codeloupe.locations')
local lsp = require('codeloupe.lsp')

local M = {}

local preview_namespace = vim.api.nvim_create_namespace('codeloupe.preview')

--- The line of a snippet the match is anchored on (0-based lines in the protocol).
---@param snippet { text: string, startLine: integer, anchorLine: integer? }?
---@return string
local function anchor_line(snippet)
  if type(snippet) ~= 'table' or type(snippet.text) ~= 'string' then
    return ''
  end
  local pieces = text_lines.split(snippet.text)
  local index = (snippet.anchorLine or snippet.startLine or 0) - (snippet.startLine or 0) + 1
  return vim.trim(pieces[index] or pieces[1] or '')
end

--- The first non-blank line of `text`.
---@param text string?
---@return string
local function first_line(text)
  for _, line in ipairs(text_lines.split(text or '')) do
    if vim.trim(line) ~= '' then
      return vim.trim(line)
    end
  end
  return ''
end

--- What a chunk's match is in: the definition holding its anchor line as the server names it ('' when
--- the line is in no definition). From a server that does not name it: the chunk's breadcrumb without the
--- leading path (the item shows the path), else its first symbol.
---@param chunk table
---@param file table
---@return string
local function chunk_label(chunk, file)
  local anchored = type(chunk.snippet) == 'table' and chunk.snippet.anchorSymbol
  if type(anchored) == 'string' then
    return anchored
  end
  local crumb = type(chunk.breadcrumb) == 'string' and chunk.breadcrumb or ''
  local prefix = (file.path or '') .. ' > '
  if crumb:sub(1, #prefix) == prefix then
    crumb = crumb:sub(#prefix + 1)
  elseif crumb == file.path then
    crumb = ''
  end
  if crumb == '' then
    crumb = (chunk.symbols or {})[1] or chunk.name or ''
  end
  return crumb
end

---@param tier string
---@param label string
---@param line string
---@return string
local function item_text(tier, label, line)
  local parts = { tier }
  if label ~= '' then
    parts[#parts + 1] = label
  end
  local text = table.concat(parts, ' ')
  if line ~= '' then
    text = text .. ' | ' .. line
  end
  return text
end

--- Quickfix items for every CORE and RELATED span of a SearchResult, in rank order. The long tail (RELATED
--- files marked `tail`: map lines the bundle keeps for completeness, after the rest) is labelled TAIL.
---@param result table SearchResult (docs/protocol.md)
---@return codeloupe.Item[]
function M.items(result)
  local items = {}
  for _, tier in ipairs({ { 'core', 'CORE' }, { 'related', 'RELATED' } }) do
    for _, file in ipairs(result[tier[1]] or {}) do
      local label = file.tail == true and 'TAIL' or tier[2]
      local meta = { tier = label, tail = file.tail == true, rank = file.rank, score = file.score, why = file.why,
        path = file.path }
      local chunks = file.chunks or {}
      if #chunks == 0 and file.location then
        local item = locations.item(file.location, item_text(label, table.concat(file.symbols or {}, ', '), file.why or ''))
        item.user_data = meta
        items[#items + 1] = item
      end
      for _, chunk in ipairs(chunks) do
        local line = anchor_line(chunk.snippet)
        if line == '' then
          line = first_line(chunk.text)
        end
        local item = locations.item(chunk.location, item_text(label, chunk_label(chunk, file), line))
        -- Open at the match, not at the start of the chunk; end_lnum keeps the chunk's last line.
        local anchor = type(chunk.snippet) == 'table' and tonumber(chunk.snippet.anchorLine)
        if anchor and anchor + 1 >= item.lnum and anchor + 1 <= item.end_lnum then
          item.lnum = anchor + 1
        end
        item.user_data = meta
        items[#items + 1] = item
      end
    end
  end
  return items
end

--- `items` with the long tail folded under one separator line naming how many files it holds (a quickfix entry
--- with no file, `valid = 0`: `:cnext` steps over it), so the list opens on the files worth reading first and
--- every tail file is still there after it. Items without a tail are returned as they are.
---@param items codeloupe.Item[]
---@return codeloupe.Item[]
function M.folded(items)
  local first, files = nil, {}
  for index, item in ipairs(items) do
    if item.user_data and item.user_data.tail then
      first = first or index
      files[item.filename or item.user_data.path] = true  -- a path two folders share is two files
    end
  end
  if not first then
    return items
  end
  local count = vim.tbl_count(files)
  local separator = {
    text = ('── %d more related file%s (the long tail) ──'):format(count, count == 1 and '' or 's'),
    valid = 0,
    user_data = { separator = true },
  }
  local out = vim.list_slice(items, 1, first - 1)
  out[#out + 1] = separator
  vim.list_extend(out, items, first)
  return out
end

--- One short line per result for pickers: `path:line  TIER symbol | matching line`, cut to the screen. The path is
--- escaped as the item's text is (`one_line`): a file named with a line break would split the picker's line.
---@param client vim.lsp.Client
---@param item codeloupe.Item
---@return string
function M.describe(client, item)
  if item.user_data and item.user_data.separator then
    return item.text
  end
  local path = text_lines.one_line(locations.relative(client.root_dir, item.filename))
  local text = ('%s:%d  %s'):format(path, item.lnum, item.text)
  local width = math.max(40, vim.o.columns - 10)
  if vim.fn.strdisplaywidth(text) > width then
    text = vim.fn.strcharpart(text, 0, width - 1) .. '…'
  end
  return text
end

--- A query as a one-line title (a pasted bug report is many lines).
---@param query string
---@return string
function M.title(query)
  local first = vim.trim(query):match('^[^\n]*')
  return first .. (vim.trim(query):find('\n') and ' …' or '')
end

---@param query string  the title (it may name a file: escaped as the items are)
---@param items codeloupe.Item[]
function M.to_quickfix(query, items)
  vim.fn.setqflist({}, ' ', { title = 'codeloupe: ' .. text_lines.one_line(query), items = items })
  vim.cmd('botright copen')
end

---@param client vim.lsp.Client
---@param query string
---@param items codeloupe.Item[]
local function select(client, query, items)
  vim.ui.select(items, {
    prompt = 'codeloupe: ' .. query,
    kind = 'codeloupe',
    format_item = function(item)
      return M.describe(client, item)
    end,
  }, function(choice)
    if choice and not (choice.user_data and choice.user_data.separator) then
      locations.jump(choice)
    end
  end)
end

-- Past any score a Telescope sorter gives a match (lower is better; the bundled sorters score within [0, 1]).
local TAIL_SCORE = 1e6

--- `sorter` (a Telescope sorter) ranking every long-tail entry after every other entry that matches the prompt,
--- in its own order among the tail; what the sorter filters out (a negative score) stays out.
---@param sorter table
---@return table
function M.tail_last(sorter)
  local score = sorter.scoring_function
  sorter.scoring_function = function(self, prompt, line, entry, ...)
    local value = score(self, prompt, line, entry, ...)
    local item = type(entry) == 'table' and entry.value or {}
    if type(value) == 'number' and value >= 0 and item.user_data and item.user_data.tail then
      return value + TAIL_SCORE
    end
    return value
  end
  return sorter
end

--- Preview buffers waiting for a shared-index document's lines: bufnr -> the request's token (the latest one shows).
---@type table<integer, table>
local previewing = {}

--- Show `item` in a picker's preview buffer `bufnr` (window `winid`) at its match line, that one line
--- highlighted. A file on disk is loaded by `load_file(filename, done)` (Telescope's buffer_previewer_maker,
--- which calls `done(bufnr)`); a shared-index document has no file: its lines come from the server
--- (`codeloupe/read`), shown when it answers (`indexdoc.loading` until then).
---@param item codeloupe.Item
---@param bufnr integer
---@param winid integer
---@param load_file fun(filename: string, done: fun(bufnr: integer))
function M.preview(item, bufnr, winid, load_file)
  local function mark(buf)
    local first = math.max(1, math.min(item.lnum, vim.api.nvim_buf_line_count(buf)))
    vim.api.nvim_buf_clear_namespace(buf, preview_namespace, 0, -1)
    -- The match line only (as the live picker does), not the whole chunk below it.
    vim.api.nvim_buf_set_extmark(buf, preview_namespace, first - 1, 0, { line_hl_group = 'Visual' })
    pcall(vim.api.nvim_win_set_cursor, winid, { first, 0 })
    vim.api.nvim_win_call(winid, function()
      vim.cmd('normal! zz')
    end)
  end
  if not indexdoc.is_document(item.filename) then
    previewing[bufnr] = nil
    load_file(item.filename, mark)
    return
  end
  vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, { indexdoc.loading })
  local asked = {}
  previewing[bufnr] = asked
  indexdoc.lines(item.filename, lsp.client(), function(lines)
    -- The preview buffer gone, or asked for another item since: that answer shows.
    if previewing[bufnr] ~= asked or not vim.api.nvim_buf_is_valid(bufnr) then
      return
    end
    previewing[bufnr] = nil
    vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, lines)
    -- Syntax only: a filetype would run ftplugins and could attach language servers to the preview buffer.
    local path = item.user_data and item.user_data.path or item.filename:gsub('%?.*$', '')
    vim.bo[bufnr].syntax = vim.filetype.match({ filename = path }) or ''
    if vim.api.nvim_win_is_valid(winid) and vim.api.nvim_win_get_buf(winid) == bufnr then
      mark(bufnr)
    end
  end)
end

---@param client vim.lsp.Client
---@param query string
---@param items codeloupe.Item[]
local function telescope(client, query, items)
  local pickers = require('telescope.pickers')
  local finders = require('telescope.finders')
  local previewers = require('telescope.previewers')
  local conf = require('telescope.config').values

  pickers.new({}, {
    prompt_title = 'codeloupe: ' .. query,
    finder = finders.new_table({
      results = items,
      entry_maker = function(item)
        return {
          value = item,
          display = M.describe(client, item),
          ordinal = locations.relative(client.root_dir, item.filename) .. ' ' .. item.text,
          filename = item.filename,
          lnum = item.lnum,
          col = 1,
        }
      end,
    }),
    sorter = M.tail_last(conf.generic_sorter({})),
    previewer = previewers.new_buffer_previewer({
      title = 'codeloupe',
      define_preview = function(self, entry)
        M.preview(entry.value, self.state.bufnr, self.state.winid, function(filename, done)
          conf.buffer_previewer_maker(filename, self.state.bufnr,
            { bufname = self.state.bufname, winid = self.state.winid, callback = done })
        end)
      end,
    }),
  }):find()
end

--- The picker searches use, as the `picker` option and what is installed decide (:checkhealth reports it), and why
--- it is not the one the option names, when it is not.
---@return 'telescope'|'select' picker, string? problem
function M.picker()
  local picker = config.options.picker
  if picker == 'select' then
    return 'select'
  end
  if pcall(require, 'telescope.pickers') then
    return 'telescope'
  end
  if picker == 'telescope' then
    return 'select', 'picker "telescope" is set but telescope.nvim is not installed; using vim.ui.select'
  end
  return 'select'
end

--- The parameters of a `codeloupe/search` request for `query`, with the user's search settings.
---@param query string
---@return table
function M.params(query)
  return { query = query, limit = config.options.search.limit, docs = config.options.search.docs }
end

--- Ask the server and hand the result to `on_result`.
---@param client vim.lsp.Client
---@param query string
---@param on_result fun(result: table)
function M.request(client, query, on_result)
  lsp.request(client, 'codeloupe/search', M.params(query), function(err, result)
    if err then
      vim.notify(lsp.error_message('codeloupe/search', err), vim.log.levels.ERROR)
      return
    end
    on_result(result or {})
  end)
end

--- `:Codeloupe search[!] {query}`.
---@param query string
---@param to_quickfix boolean  fill the quickfix list instead of opening a picker
function M.run(query, to_quickfix)
  if vim.trim(query) == '' then
    vim.notify('codeloupe: search needs a query, e.g. :Codeloupe search where are sessions created', vim.log.levels.ERROR)
    return
  end
  lsp.with_client(function(client)
    M.request(client, query, function(result)
      local items = M.items(result)
      local notes = table.concat(result.notes or {}, '; ')
      if #items == 0 then
        vim.notify(('codeloupe: %s: %s'):format(M.title(query), notes ~= '' and notes or 'nothing found'),
          vim.log.levels.WARN)
        return
      end
      -- What the server says about the answer (a partial dense lane, no real match) goes with the results.
      local title = M.title(query) .. (notes ~= '' and (' (' .. notes .. ')') or '')
      if to_quickfix then
        M.to_quickfix(title, M.folded(items))
        return
      end
      local picker, problem = M.picker()
      if problem then
        vim.notify('codeloupe: ' .. problem, vim.log.levels.WARN)
      end
      if picker == 'telescope' then
        telescope(client, title, items)
      else
        select(client, title, M.folded(items))
      end
    end)
  end)
end

return M
