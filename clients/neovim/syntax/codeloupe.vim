" Syntax for codeloupe's graph view: headings, hop arrows and site labels. Not markdown, so paths such
" as pkg/__init__.py and names such as _private are shown as written.
if exists('b:current_syntax')
  finish
endif
syntax match codeloupeHeading /^#.*$/
syntax match codeloupeArrow /<-\[[^\]]*\]-\|-\[[^\]]*\]->\| \~ /
syntax match codeloupeLabel /^\s*\%(use\|definition\|carriers\|community\):/
syntax match codeloupeNumber /^\d\+\./
" A hop's code, verbatim from disk.
syntax match codeloupeCode /^     | .*$/
hi def link codeloupeHeading Title
hi def link codeloupeArrow Operator
hi def link codeloupeLabel Label
hi def link codeloupeNumber Number
hi def link codeloupeCode String
let b:current_syntax = 'codeloupe'
