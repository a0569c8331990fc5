--- Lines as the server counts them (docs/protocol.md), which is how the LSP and editors count them: a line
--- ends at "\n", "\r\n" or a lone "\r" and nowhere else. Every line number the server sends counts this way,
--- so text it sends (a chunk, a snippet, a citation, a file) is split here before its lines are numbered or
--- shown (a lone "\r" left inside a buffer line would show as ^M and merge two lines).
local M = {}

--- The pieces of `text` between line breaks. As vim.split: a final break leaves an empty last piece.
---@param text string
---@return string[]
function M.split(text)
  return vim.split((text:gsub('\r\n?', '\n')), '\n', { plain = true })
end

--- `text` as the lines of a file, and whether it ends with a line break (the empty piece after which is no
--- line of its own).
---@param text string
---@return string[] lines, boolean eol
function M.of_file(text)
  local lines = M.split(text)
  local eol = #lines > 1 and lines[#lines] == ''
  if eol then
    table.remove(lines)
  end
  return lines, eol
end

return M
