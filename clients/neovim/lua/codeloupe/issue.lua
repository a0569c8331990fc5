--- `:Codeloupe issue[!]`: a scratch buffer to paste a multi-line bug report (a traceback, a failing test's
--- output) into; `:w` searches with the whole text, which the server answers in issue mode.
local config = require('codeloupe.config')

local M = {}

M.buffer_name = 'codeloupe://issue'

---@param to_quickfix boolean  `:Codeloupe issue!`: results go to the quickfix list, not a picker
function M.open(to_quickfix)
  local buf = vim.fn.bufnr(M.buffer_name)
  if buf == -1 then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, M.buffer_name)
    vim.bo[buf].buftype = 'acwrite'
    vim.bo[buf].bufhidden = 'hide'
    vim.bo[buf].swapfile = false
    vim.bo[buf].filetype = 'text'
  end
  vim.b[buf].codeloupe_quickfix = to_quickfix
  vim.api.nvim_clear_autocmds({ event = 'BufWriteCmd', buffer = buf })
  vim.api.nvim_create_autocmd('BufWriteCmd', {
    buffer = buf,
    callback = function()
      local text = vim.trim(table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n'))
      vim.bo[buf].modified = false
      if text == '' then
        vim.notify('codeloupe: paste a bug report into this buffer, then :w to search with it', vim.log.levels.WARN)
        return
      end
      require('codeloupe.search').run(text, vim.b[buf].codeloupe_quickfix == true)
    end,
  })
  local win = vim.fn.bufwinid(buf)
  if win ~= -1 then
    vim.api.nvim_set_current_win(win)
  elseif config.options.layout == 'float' or config.options.layout == 'tab' then
    vim.cmd('tab sbuffer ' .. buf)
  else
    vim.cmd(('botright %s %d'):format(config.options.layout == 'split' and 'sbuffer' or 'vertical sbuffer', buf))
  end
  vim.api.nvim_echo({ { 'codeloupe: paste the bug report here, then :w to search with it' } }, false, {})
end

return M
