"""What a strategy module's code may reach: a few text modules, cut down to their plain functions, and a few
builtins.

A workspace strategy is code a model wrote (forge runs it to check it before anyone has read it) or code that
arrived with a repository. Checking its imports is not enough on its own: an allowed module hands out the
modules it imports itself (`re.enum.sys.modules["os"]`), a function hands out its module's globals, a generator
its caller's frame. So the module runs with builtins that hold no way to import, open or evaluate anything, and
an import gives it a namespace of the module's public non-module members (only the listed ones, for modules
whose other members evaluate text or copy attributes by name); and its source is refused before it runs when it
names a dunder, or an attribute that leads to frames, code or attribute lookups by string.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from types import ModuleType, SimpleNamespace
from typing import Any

from codeloupe.chunk import strategy_re

# module -> the members a strategy may use (None: every public member that is not itself a module)
ALLOWED_MODULES: dict[str, frozenset[str] | None] = {
    "re": frozenset(strategy_re.PUBLIC),
    "itertools": None,
    "bisect": None,
    "math": None,
    "string": frozenset({"ascii_letters", "ascii_lowercase", "ascii_uppercase", "digits", "hexdigits",
                         "octdigits", "punctuation", "printable", "whitespace", "capwords"}),
    "collections": frozenset({"defaultdict", "OrderedDict", "Counter", "deque", "namedtuple", "ChainMap"}),
    "functools": frozenset({"reduce", "partial", "lru_cache", "cache", "cmp_to_key"}),
    "typing": frozenset({"Any", "Callable", "Dict", "FrozenSet", "Iterable", "Iterator", "List", "Optional",
                         "Sequence", "Set", "Tuple", "Union", "Pattern", "Match"}),
    "textwrap": frozenset({"dedent", "indent", "wrap", "fill", "shorten"}),
    "__future__": frozenset({"annotations"}),
}
ALLOWED_IMPORTS = frozenset(ALLOWED_MODULES)
FORBIDDEN_NAMES = frozenset({"open", "exec", "eval", "compile", "__import__", "globals", "locals", "vars",
                             "getattr", "setattr", "delattr", "input", "breakpoint", "exit", "quit", "help",
                             "memoryview", "type"})
SAFE_BUILTINS = frozenset({
    "abs", "all", "any", "ascii", "bin", "bool", "bytes", "callable", "chr", "classmethod", "dict", "divmod",
    "enumerate", "filter", "float", "frozenset", "hash", "hex", "int", "isinstance", "issubclass", "iter", "len",
    "list", "map", "max", "min", "next", "object", "oct", "ord", "pow", "property", "range", "repr", "reversed",
    "round", "set", "slice", "sorted", "staticmethod", "str", "sum", "super", "tuple", "zip", "None", "True",
    "False", "NotImplemented", "Ellipsis", "Exception", "ArithmeticError", "AssertionError", "AttributeError",
    "IndexError", "KeyError", "LookupError", "NotImplementedError", "RecursionError", "RuntimeError",
    "StopIteration", "TypeError", "ValueError", "ZeroDivisionError",
})
# Attributes of generators, coroutines, tracebacks, frames and code objects (they lead to other modules'
# globals), and str.format's field lookups by name.
_REACHING_ATTRIBUTE = re.compile(r"(gi|cr|ag|tb|f|co)_\w+|format|format_map|mro")
# What a strategy's `import re` gives it: Python's functions on RE2 (linear time; see `strategy_re`).
_STAND_INS = {"re": strategy_re}


def _surface(name: str) -> SimpleNamespace:
    module = _STAND_INS.get(name) or importlib.import_module(name)
    listed = ALLOWED_MODULES[name]
    names = listed if listed is not None else [n for n in dir(module) if not n.startswith("_")]
    members = {n: getattr(module, n) for n in sorted(names)}
    return SimpleNamespace(**{n: value for n, value in members.items() if not isinstance(value, ModuleType)})


def _import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    if level != 0 or name not in ALLOWED_MODULES:
        raise ImportError(f"a strategy may import only {', '.join(sorted(ALLOWED_IMPORTS))}; not {name!r}")
    return _surface(name)


def module_globals(module_name: str) -> dict[str, Any]:
    """The globals a strategy module runs in."""
    allowed = {name: getattr(builtins, name) for name in SAFE_BUILTINS}
    allowed |= {"__build_class__": builtins.__build_class__, "__import__": _import}
    return {"__name__": module_name, "__builtins__": allowed}


def static_problems(source: str) -> list[str]:
    """Why this module's source is refused before any of it runs ([] when it is not)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"not valid Python: {exc.msg} (line {exc.lineno})"]
    except (RecursionError, MemoryError):  # Python's parser gives up on deep nesting so (`1 + 1 + ...`, `----1`)
        return ["not valid Python: too deeply nested for Python's parser"]
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""] if node.level == 0 else ["(relative import)"]
        else:
            modules = []
        problems += [f"line {node.lineno}: imports {m!r}; only {', '.join(sorted(ALLOWED_IMPORTS))} are allowed"
                     for m in modules if m not in ALLOWED_IMPORTS]
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            problems.append(f"line {node.lineno}: uses {node.id!r}; a strategy does no I/O and no dynamic code")
        if isinstance(node, ast.Attribute) and _REACHING_ATTRIBUTE.fullmatch(node.attr):
            problems.append(f"line {node.lineno}: uses the attribute {node.attr!r}")
        if isinstance(node, ast.Match):  # a class pattern reads attributes named as plain strings (`object(__class__=c)`)
            problems.append(f"line {node.lineno}: uses a match statement; a strategy matches text with `re`")
        problems += [f"line {getattr(node, 'lineno', '?')}: names {name!r}; a strategy names no dunder"
                     for name in identifiers(node) if _is_dunder(name)]
    return problems + strategy_re.literal_pattern_problems(tree)


# Every field of the syntax tree that holds an identifier as a plain string (a name, an attribute, a keyword or
# parameter, an alias, a pattern's capture): a dunder anywhere there is refused, not only in Name and Attribute.
_IDENTIFIER_FIELDS = frozenset({"id", "attr", "arg", "name", "asname", "rest", "names", "kwd_attrs"})


def identifiers(node: ast.AST) -> list[str]:
    """Every identifier this node holds as a plain string (not those of its children)."""
    out: list[str] = []
    for field, value in ast.iter_fields(node):
        if field not in _IDENTIFIER_FIELDS:
            continue
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, list):
            out += [item for item in value if isinstance(item, str)]
    return out


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name != "__init__"
