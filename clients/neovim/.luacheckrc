-- luacheck (Debian package lua-check): run `luacheck .` in clients/neovim (it reads this file from the current directory).
std = 'luajit'
globals = { 'vim' }
max_line_length = false
