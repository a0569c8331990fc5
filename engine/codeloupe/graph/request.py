"""What one graph call asks for: a node (a file, a concept or a folder), a route between two concepts, or,
naming neither, the map. Every surface builds one from its own parameters (`codeloupe graph`, `/v1/graph`,
MCP's `graph`, the editor's `codeloupe/graph`), so a request that cannot be answered is refused once, with the
same message everywhere, before any graph is read or any index waited for."""

from __future__ import annotations

from dataclasses import dataclass

from codeloupe.errors import WorkspaceError


class GraphRequestError(WorkspaceError):
    """A graph request with a blank part, asking for a node and a route at once, or for a route with only one end."""

    @classmethod
    def blank(cls, part: str) -> GraphRequestError:
        """The refusal of `part` given but blank, also where a surface tells an empty value from one left out."""
        return cls(f"`{part}` is blank: name a file or a concept, or leave it out")


@dataclass(frozen=True)
class GraphRequest:
    """An empty string is a part not asked for, as an absent query parameter or tool argument is."""

    node: str = ""
    source: str = ""
    target: str = ""

    def __post_init__(self) -> None:
        for part in ("node", "source", "target"):
            # Given, but only whitespace: a slip to name, where it counted as given and the lookup refused it as
            # a vague "empty graph target".
            if getattr(self, part) and not getattr(self, part).strip():
                raise GraphRequestError.blank(part)
        if self.node and (self.source or self.target):
            raise GraphRequestError("ask for one `node` or for a route (`source` and `target`), not both")
        if self.source and not self.target:
            raise GraphRequestError("a route needs a `target` as well as its `source`")
        if self.target and not self.source:
            raise GraphRequestError("a route needs a `source` as well as its `target`")
