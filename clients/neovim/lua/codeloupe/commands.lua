--- The `:Codeloupe` command: subcommand dispatch and completion.
local M = {}

--- The query of a search or ask given without one: the visual selection when the command has a range
--- (every line kept: a selected traceback stays a traceback), else the word under the cursor.
---@param opts { range: integer, line1: integer, line2: integer }
---@return string
function M.implicit_query(opts)
  if (opts.range or 0) > 0 then
    local mode = vim.fn.visualmode()
    local start, finish = vim.fn.getpos("'<"), vim.fn.getpos("'>")
    local marked = start[2] == opts.line1 and finish[2] == opts.line2 and mode ~= ''
    local lines = marked and vim.fn.getregion(start, finish, { type = mode })
      or vim.api.nvim_buf_get_lines(0, opts.line1 - 1, opts.line2, false)
    return table.concat(lines, '\n')
  end
  return vim.fn.expand('<cword>')
end

--- `line` split into words as the command line splits `:Codeloupe`'s arguments (its fargs): at whitespace, except
--- whitespace or a backslash after a backslash, which is kept in the word without that backslash (`my\ file.py`).
---@param line string
---@return string[]
function M.words(line)
  local words, word = {}, nil
  local i = 1
  while i <= #line do
    local c = line:sub(i, i)
    local escaped = c == '\\' and line:sub(i + 1, i + 1):match('[%s\\]')
    if escaped then
      word, i = (word or '') .. escaped, i + 2
    else
      if c:match('%s') then
        words[#words + 1], word = word, nil
      else
        word = (word or '') .. c
      end
      i = i + 1
    end
  end
  words[#words + 1] = word
  return words
end

---@type table<string, fun(args: string, fargs: string[], bang: boolean, opts: { line1: integer, line2: integer })>
local subcommands = {
  search = function(args, _, bang)
    require('codeloupe.search').run(args, bang)
  end,
  live = function(args)
    require('codeloupe.live').open(args)
  end,
  ask = function(args)
    require('codeloupe.ask').run(args)
  end,
  tour = function(args)
    require('codeloupe.tour').run(args)
  end,
  related = function(_, _, _, opts)
    require('codeloupe.related').run(opts)
  end,
  graph = function(_, fargs)
    require('codeloupe.graph').run(fargs)
  end,
  reindex = function()
    require('codeloupe.index').reindex()
  end,
  status = function()
    require('codeloupe.index').status()
  end,
  issue = function(_, _, bang)
    require('codeloupe.issue').open(bang)
  end,
}

--- Subcommands whose argument is a query, taken from the selection or <cword> when it is left out.
local takes_query = { search = true, ask = true }

--- Subcommands that take no argument: words after one are refused, not dropped (`:Codeloupe reindex shop/` would
--- read as re-scanning shop/ alone while the whole folder is).
local takes_none = { related = true, reindex = true, status = true, issue = true }

--- Handler of the user command.
---@param opts { args: string, fargs: string[], bang: boolean, range: integer, line1: integer, line2: integer }
function M.run(opts)
  -- `:Codeloupe search! q` and `:Codeloupe! search q` mean the same.
  local name, bang = (opts.fargs[1] or ''):match('^(.-)(!?)$')
  local subcommand = subcommands[name]
  if not subcommand then
    local known = vim.tbl_keys(subcommands)
    table.sort(known)
    vim.notify(('codeloupe: unknown subcommand %q; use one of: %s'):format(opts.fargs[1] or '', table.concat(known, ', ')),
      vim.log.levels.ERROR)
    return
  end
  -- The query keeps its own spacing; only the subcommand word is removed.
  local rest = opts.args:match('^%s*%S+%s*(.-)%s*$') or ''
  if takes_none[name] and rest ~= '' then
    vim.notify(('codeloupe: %s takes no arguments (got %q)'):format(name, rest), vim.log.levels.ERROR)
    return
  end
  if name == 'ask' and rest == '' and (opts.range or 0) == 0 then
    require('codeloupe.ask').pick()
    return
  end
  if takes_query[name] and rest == '' then
    rest = M.implicit_query(opts)
  end
  subcommand(rest, vim.list_slice(opts.fargs, 2), opts.bang or bang == '!', opts)
end

--- Paths for `:Codeloupe graph node|path`, which takes them relative to the workspace folder of the current buffer
--- (not to the current directory, which may be another): the names under that folder starting with `arg_lead`, a
--- folder's ending in `/`, hidden ones only once a `.` is typed, a space escaped as the command line splits on it.
--- A name `%`, `#` or `~` and absolute paths, and a buffer with no workspace, complete as files do.
---@param arg_lead string
---@return string[]
function M.complete_path(arg_lead)
  local lsp = require('codeloupe.lsp')
  local client = lsp.client()
  local root = client and lsp.folder(client, lsp.file())
  if not root or arg_lead:match('^[%%#~/]') then
    return vim.fn.getcompletion(arg_lead, 'file')
  end
  local typed = arg_lead:gsub('\\ ', ' ')
  local dir, prefix = typed:match('^(.*/)([^/]*)$')
  dir, prefix = dir or '', prefix or typed
  local path = vim.fs.joinpath(root, dir)
  local out = {}
  if vim.fn.isdirectory(path) == 0 then
    return out
  end
  for name, kind in vim.fs.dir(path) do
    if name:sub(1, #prefix) == prefix and (name:sub(1, 1) ~= '.' or prefix:sub(1, 1) == '.') then
      out[#out + 1] = ((dir .. name):gsub(' ', '\\ ')) .. (kind == 'directory' and '/' or '')
    end
  end
  table.sort(out)
  return out
end

--- Completion for `:Codeloupe`.
---@param arg_lead string
---@param cmdline string
---@return string[]
function M.complete(arg_lead, cmdline)
  local words = vim.split(cmdline, '%s+', { trimempty = true })
  local completing_new_word = cmdline:match('%s$') ~= nil
  local position = #words + (completing_new_word and 1 or 0)
  local candidates = {}
  if position == 2 then
    candidates = vim.tbl_keys(subcommands)
    table.sort(candidates)
  elseif words[2] == 'ask' and position >= 3 then
    return require('codeloupe.flows').complete(cmdline:match('^%s*%S+%s+ask%s+(.*)$') or '', arg_lead)
  elseif words[2] == 'graph' and position == 3 then
    candidates = { 'map', 'node', 'path' }
  elseif words[2] == 'graph' and (words[3] == 'node' or words[3] == 'path') then
    return M.complete_path(arg_lead)
  end
  return vim.tbl_filter(function(candidate)
    return candidate:sub(1, #arg_lead) == arg_lead
  end, candidates)
end

return M
