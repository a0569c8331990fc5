"""Per-grammar data for the one syntax chunker: which nodes define things, and how they are named.

The algorithm in `syntax.py` knows no language. Everything it needs to know about a grammar lives in a
`LangSpec`: shipped ones for the languages we care most about, and a generic one, derived from the
grammar's own node-type names, for every other grammar in the pack.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType

from codeloupe.chunk.languages import get_parser

# Symbol kinds that hold members worth chunking one by one.
CONTAINER_KINDS = frozenset({"class", "interface", "struct", "trait", "impl", "module", "namespace",
                             "enum", "object", "protocol", "extension", "record"})


def _kinds(**groups: tuple[str, ...]) -> Mapping[str, str]:
    """`_kinds(function=("a", "b"))` -> {"a": "function", "b": "function"}: node type -> symbol kind."""
    return MappingProxyType({node_type: kind for kind, types in groups.items() for node_type in types})


@dataclass(frozen=True)
class LangSpec:
    language: str
    # node type -> symbol kind (function, class, struct, constant, ...); a function in a container is a method
    definitions: Mapping[str, str]
    # wrapper node type -> the fields that may hold the wrapped definition (decorators, `export`, templates);
    # an empty tuple means "the first named child that is a definition"
    wrappers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    name_fields: tuple[str, ...] = ("name",)
    body_fields: tuple[str, ...] = ("body",)
    # child node types that are a definition's body when the grammar has no body field (Kotlin, Swift)
    body_types: frozenset[str] = frozenset()
    # nodes that belong to the definition that follows them (comments are always such nodes)
    leading: frozenset[str] = frozenset()
    # Python-style docstrings: the first string statement of a body
    docstrings: bool = False
    # assignment node type -> (target field, value field): `proto.use = function`, `X = 1`, `f = lambda`
    assignments: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # declarator node types of `const f = () => {}` style variable declarations: (name field, value field)
    declarators: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # value node types that make an assignment or declarator a function/class definition
    function_values: frozenset[str] = frozenset()
    class_values: frozenset[str] = frozenset()
    object_values: frozenset[str] = frozenset()  # `module.exports = {...}`: a top-level dotted target only
    # containers that are not symbols themselves; their members belong to the enclosing definition
    transparent: Mapping[str, str] = field(default_factory=dict)  # node type -> breadcrumb label
    # how the syntax chunker derives a name for node types whose name is not in a field
    special_names: Mapping[str, str] = field(default_factory=dict)  # node type -> naming rule

    def kind_of(self, node_type: str) -> str | None:
        return self.definitions.get(node_type)


_JS_DEFS = _kinds(
    function=("function_declaration", "generator_function_declaration", "function_signature"),
    method=("method_definition", "method_signature", "abstract_method_signature"),
    **{"class": ("class_declaration", "abstract_class_declaration")},
    interface=("interface_declaration",),
    type=("type_alias_declaration",),
    enum=("enum_declaration",),
    namespace=("internal_module", "module"),
)
_JS_COMMON = dict(
    wrappers={"export_statement": ("declaration", "value"), "ambient_declaration": ()},
    assignments={"assignment_expression": ("left", "right")},
    declarators={"variable_declarator": ("name", "value")},
    function_values=frozenset({"function_expression", "function", "arrow_function",
                               "generator_function"}),
    class_values=frozenset({"class"}),
    object_values=frozenset({"object"}),
)

SPECS: dict[str, LangSpec] = {}


def _ship(*languages: str, **kwargs: object) -> None:
    for language in languages:
        SPECS[language] = LangSpec(language=language, **kwargs)  # type: ignore[arg-type]


_ship(
    "python",
    definitions=_kinds(function=("function_definition",), **{"class": ("class_definition",)}),
    wrappers={"decorated_definition": ("definition",)},
    docstrings=True,
    assignments={"assignment": ("left", "right")},
    function_values=frozenset({"lambda"}),
)
_ship("javascript", "typescript", "tsx", definitions=_JS_DEFS, **_JS_COMMON)  # type: ignore[arg-type]
_ship(
    "ruby",
    definitions=_kinds(method=("method", "singleton_method"), module=("module",),
                       **{"class": ("class", "singleton_class")}),
    transparent={"singleton_class": "class << self"},
    assignments={"assignment": ("left", "right")},
)
_ship(
    "go",
    definitions=_kinds(function=("function_declaration",), method=("method_declaration",),
                       type=("type_spec", "type_alias"), constant=("const_spec",)),
    special_names={"method_declaration": "go_receiver"},
)
_ship(
    "rust",
    definitions=_kinds(function=("function_item", "function_signature_item"), struct=("struct_item",),
                       enum=("enum_item",), trait=("trait_item",), impl=("impl_item",), module=("mod_item",),
                       type=("type_item", "union_item"), constant=("const_item", "static_item"),
                       macro=("macro_definition",)),
    leading=frozenset({"attribute_item"}),
    special_names={"impl_item": "rust_impl"},
)
_ship(
    "php",
    definitions=_kinds(function=("function_definition",), method=("method_declaration",),
                       interface=("interface_declaration",), trait=("trait_declaration",),
                       enum=("enum_declaration",), namespace=("namespace_definition",),
                       constant=("const_element",), **{"class": ("class_declaration",)}),
)
_ship(
    "java",
    definitions=_kinds(method=("method_declaration", "constructor_declaration",
                               "compact_constructor_declaration"),
                       interface=("interface_declaration", "annotation_type_declaration"),
                       enum=("enum_declaration",), record=("record_declaration",),
                       **{"class": ("class_declaration",)}),
)
_C_DEFS = dict(
    function=("function_definition",), struct=("struct_specifier", "union_specifier"),
    enum=("enum_specifier",), type=("type_definition",), macro=("preproc_function_def",),
    constant=("preproc_def",),
)
_ship("c", definitions=_kinds(**_C_DEFS), name_fields=("name", "declarator"))
_ship(
    "cpp",
    definitions=_kinds(**_C_DEFS, namespace=("namespace_definition",),
                       **{"class": ("class_specifier",)}),
    wrappers={"template_declaration": ()},
    name_fields=("name", "declarator"),
)
_ship(
    "csharp",
    definitions=_kinds(method=("method_declaration", "constructor_declaration", "destructor_declaration",
                               "operator_declaration", "local_function_statement"),
                       interface=("interface_declaration",), struct=("struct_declaration",),
                       enum=("enum_declaration",), record=("record_declaration",),
                       namespace=("namespace_declaration", "file_scoped_namespace_declaration"),
                       property=("property_declaration",), **{"class": ("class_declaration",)}),
)
_ship(
    "kotlin",
    definitions=_kinds(function=("function_declaration",), object=("object_declaration",),
                       **{"class": ("class_declaration",)}),
    body_types=frozenset({"class_body", "function_body", "enum_class_body"}),
)
_ship(
    "swift",
    definitions=_kinds(function=("function_declaration", "init_declaration", "deinit_declaration"),
                       protocol=("protocol_declaration",), type=("typealias_declaration",),
                       **{"class": ("class_declaration",)}),
)
_ship(
    "lua",
    definitions=_kinds(function=("function_declaration", "function_definition_statement",
                                 "local_function_definition_statement")),
)
_ship("bash", definitions=_kinds(function=("function_definition",)))

# Generic specs: node types named like definitions in most grammars.
_CLASS_WORDS = ("class", "struct", "interface", "trait", "protocol", "module", "namespace", "impl",
                "enum", "record", "object", "union")
_FUNCTION_WORDS = ("function", "method", "procedure", "subroutine", "func", "fn", "def", "macro",
                   "constructor")
_DEFINITION_SUFFIX = re.compile(r"_(definition|declaration|item|specifier|def|decl)$")


def _guess_kind(node_type: str) -> str | None:
    words = node_type.split("_")
    if node_type in ("class", "module", "function", "method"):
        return node_type
    if not _DEFINITION_SUFFIX.search(node_type):
        return None
    for word in words:
        if word in _CLASS_WORDS:
            return "class" if word in ("class", "object", "record") else word
    for word in words:
        if word in _FUNCTION_WORDS:
            return "function"
    return None


@cache
def spec_for(language: str) -> LangSpec:
    """The shipped spec for `language`, else one guessed from the grammar's node-type names."""
    if language in SPECS:
        return SPECS[language]
    definitions: dict[str, str] = {}
    parser = get_parser(language)
    if parser is not None:
        grammar = parser.language
        for kind_id in range(grammar.node_kind_count):
            if grammar.node_kind_is_named(kind_id) and grammar.node_kind_is_visible(kind_id):
                node_type = grammar.node_kind_for_id(kind_id)
                kind = node_type and _guess_kind(node_type)
                if kind:
                    definitions[node_type] = kind
    return LangSpec(language=language, definitions=MappingProxyType(definitions),
                    name_fields=("name", "declarator"))
