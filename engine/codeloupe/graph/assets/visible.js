// Text from a repository as the pages show it (code, a file's or a symbol's name): its control characters, and
// the bidirectional formatting ones, as escapes (`\x1b`, `\u202e`), the set the CLI escapes
// (codeloupe.types.visible). A bidi override shown raw reorders what a reader sees, so a line of code reads
// otherwise than it runs ("Trojan Source") and a name shows its end first. Tab and "\n" stay; a CRLF is a "\n".
// One character becomes a few, never a line break: code split into lines keeps its line numbers.
var CONTROL_CHARACTERS = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

function visible(text) {
  return String(text).replace(/\r\n/g, "\n").replace(CONTROL_CHARACTERS, function (found) {
    var code = found.charCodeAt(0);
    return code < 0x100 ? "\\x" + code.toString(16).padStart(2, "0") : "\\u" + code.toString(16).padStart(4, "0");
  });
}

// A name (a file's path, a breadcrumb, a community's) on one line, as the CLI writes it (codeloupe.types.one_line): a
// line break in it as `\n`. Left raw, a page renders the break as a space, and `a\nb.py` read as the file `a b.py`.
function oneLine(text) {
  return visible(text).replace(/\n/g, "\\n");
}
