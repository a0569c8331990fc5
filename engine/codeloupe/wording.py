"""Counts said in words, as every command and the graph's text map print them."""

from __future__ import annotations


def amount(count: int, noun: str, plural: str = "", *, grouped: bool = False) -> str:
    """`count` and its noun, singular for one: "1 batch", "3 batches" (`plural`: noun + "s" when not given);
    `grouped`: the count's thousands separated, "300,000 vectors", for a command whose counts run that high."""
    shown = f"{count:,}" if grouped else str(count)
    return f"{shown} {counted_noun(count, noun, plural)}"


def counted_noun(count: int, noun: str, plural: str = "") -> str:
    """The noun `amount` puts after `count`, for a table that aligns the count on its own."""
    return noun if count == 1 else plural or noun + "s"
