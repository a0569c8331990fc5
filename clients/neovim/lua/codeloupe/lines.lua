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

--- One line as the server shows text to a person (codeloupe.types.visible), as the ask view shows a model's prose:
--- control characters other than tab, and the bidirectional formatting ones, written as escapes (`\x1b`, `\u202e`).
---@param line string
---@return string
function M.visible(line)
  local function byte(c)
    return ('\\x%02x'):format(c:byte())
  end
  line = line:gsub('[%z\1-\8\11-\31\127]', byte)
  line = line:gsub('\194([\128-\159])', byte) -- U+0080-U+009F
  line = line:gsub('\216\156', '\\u061c')
  line = line:gsub('\226\128([\142\143\170-\174])', function(c) -- U+200E, U+200F, U+202A-U+202E
    return ('\\u20%02x'):format(c:byte() - 0x80)
  end)
  line = line:gsub('\226\129([\166-\169])', function(c) -- U+2066-U+2069
    return ('\\u20%02x'):format(c:byte() - 0x80 + 0x40)
  end)
  return line
end

--- A name (a path, a symbol, a location) on one line as the server shows it in markdown (codeloupe.types.one_line):
--- `visible`, and a line break in it written as `\n`, so a file named with one cannot start a line of the view
--- (a forged heading or list entry) nor split the line whose <CR> opens it.
---@param text string
---@return string
function M.one_line(text)
  return (M.visible((text:gsub('\r\n', '\n'))):gsub('\n', '\\n'))
end

return M
