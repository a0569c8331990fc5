--- Scratch buffers (ask answers, graph trees) whose lines can be followed to code with <CR> / gd.
local locations = require('codeloupe.locations')

local M = {}

---@alias codeloupe.Target codeloupe.Item|fun(col: integer): codeloupe.Item?

---@class codeloupe.View
---@field targets table<integer, codeloupe.Target>  1-based line -> what <CR> opens there
---@field origin integer?  the window the view was opened from; followed spans open there

---@type table<integer, codeloupe.View>
local views = {}

---@param win integer
---@return boolean
local function is_float(win)
  return vim.api.nvim_win_get_config(win).relative ~= ''
end

---@param name string
---@return integer?
local function existing_buffer(name)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(buf) == name then
      return buf
    end
  end
end

---@param name string
---@param filetype string
---@return integer
local function create_buffer(name, filetype)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(buf, name)
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = filetype
  local map = function(lhs, rhs, desc)
    vim.keymap.set('n', lhs, rhs, { buffer = buf, nowait = true, silent = true, desc = desc })
  end
  map('<CR>', M.follow, 'codeloupe: open the code on this line')
  map('gd', M.follow, 'codeloupe: open the code on this line')
  map('q', '<Cmd>close<CR>', 'codeloupe: close')
  vim.api.nvim_create_autocmd('BufWipeout', {
    buffer = buf,
    callback = function()
      views[buf] = nil
    end,
  })
  return buf
end

---@param buf integer
---@param layout 'split'|'vsplit'|'float'|'tab'
---@return integer win
local function open_window(buf, layout)
  if layout == 'float' then
    local width = math.floor(vim.o.columns * 0.8)
    local height = math.floor((vim.o.lines - vim.o.cmdheight) * 0.8)
    return vim.api.nvim_open_win(buf, true, {
      relative = 'editor',
      width = width,
      height = height,
      row = math.floor((vim.o.lines - height) / 2) - 1,
      col = math.floor((vim.o.columns - width) / 2),
      border = 'rounded',
    })
  end
  local open = { split = 'botright sbuffer', vsplit = 'botright vertical sbuffer', tab = 'tab sbuffer' }
  vim.cmd(('%s %d'):format(open[layout], buf))
  return vim.api.nvim_get_current_win()
end

--- Show `lines` in the scratch buffer called `name`. A visible view is updated in place without
--- taking the focus unless `focus` is set (answers stream in while the user reads code); a hidden one
--- opens and is focused.
---@param opts { name: string, filetype: string, layout: 'split'|'vsplit'|'float'|'tab', lines: string[], targets: table<integer, codeloupe.Target>?, focus: boolean? }
---@return integer buf, integer win
function M.show(opts)
  local origin = vim.api.nvim_get_current_win()
  local buf = existing_buffer(opts.name) or create_buffer(opts.name, opts.filetype)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, opts.lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false

  local win = vim.fn.bufwinid(buf)
  if win == -1 then
    win = open_window(buf, opts.layout)
  elseif opts.focus then
    vim.api.nvim_set_current_win(win)
  end
  local previous = views[buf]
  views[buf] = {
    targets = opts.targets or {},
    -- Re-rendering from inside the view keeps the window the user originally came from.
    origin = origin ~= win and origin or (previous and previous.origin),
  }
  return buf, win
end

--- "1 file", "2 files": counts in view headings.
---@param n integer
---@param noun string
---@param plural string?  when not noun .. 's'
---@return string
function M.count(n, noun, plural)
  return ('%d %s'):format(n, n == 1 and noun or (plural or noun .. 's'))
end

--- The target on `lnum` of view `buf` (col is 0-based, for lines holding several references).
---@param buf integer
---@param lnum integer
---@param col integer
---@return codeloupe.Item?
function M.target(buf, lnum, col)
  local view = views[buf]
  local target = view and view.targets[lnum]
  if type(target) == 'function' then
    return target(col)
  end
  return target
end

--- The window a followed span opens in: the one the view came from, else another file window,
--- else a new split above the view.
---@param from integer
---@param origin integer?
---@return integer
local function destination(from, origin)
  if origin and origin ~= from and vim.api.nvim_win_is_valid(origin) and not is_float(origin) then
    return origin
  end
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if win ~= from and not is_float(win) and vim.bo[vim.api.nvim_win_get_buf(win)].buftype == '' then
      return win
    end
  end
  if is_float(from) then
    vim.api.nvim_win_close(from, false)
    return vim.api.nvim_get_current_win()
  end
  vim.cmd('aboveleft split')
  return vim.api.nvim_get_current_win()
end

--- <CR> / gd in a view: open the code the cursor line points at.
function M.follow()
  local buf = vim.api.nvim_get_current_buf()
  local from = vim.api.nvim_get_current_win()
  local cursor = vim.api.nvim_win_get_cursor(from)
  local item = M.target(buf, cursor[1], cursor[2])
  if not item then
    vim.notify('codeloupe: nothing to open on this line', vim.log.levels.INFO)
    return
  end
  local view = views[buf]
  local win = destination(from, view and view.origin)
  if is_float(from) and vim.api.nvim_win_is_valid(from) then
    vim.api.nvim_win_close(from, false)
  end
  locations.jump(item, win)
end

return M
