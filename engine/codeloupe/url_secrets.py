"""The secrets a URL may carry kept out of every message, log line and listing: the password of its user part
(`postgresql://user:PASSWORD@host/db`, `https://user:PASSWORD@host`) and of its `password=` / `sslpassword=`
parameters (libpq takes both), in the form written and percent-decoded. libpq's own error text quotes them
(`invalid percent-encoded token: "hun%ZZter2"`) or the whole URL, so what it says is redacted too, not dropped:
the user still learns what was wrong with the URL."""

from __future__ import annotations

from urllib.parse import unquote

SECRET_PARAMETERS = ("password", "sslpassword")
HIDDEN = "<password>"  # what a secret reads as in a message


def redact(url: str) -> str:
    """`url` fit for a message or a log: the password of its user part and its secret parameters left out."""
    base, question, query = url.partition("?")
    if question:
        kept = [p for p in query.split("&") if unquote(p.partition("=")[0]).lower() not in SECRET_PARAMETERS]
        query = "&".join(kept)
        question = "?" if kept else ""
    head, sep, tail = base.partition("@")
    if sep and "://" in head:
        scheme, _, credentials = head.partition("://")
        base = f"{scheme}://{credentials.split(':', 1)[0]}@{tail}"
    return f"{base}{question}{query}"


def secrets(url: str) -> list[str]:
    """The secrets `url` holds, as written and percent-decoded, longest first (so none is left in part)."""
    base, _, query = url.partition("?")
    found = [value for key, eq, value in (p.partition("=") for p in query.split("&"))
             if eq and unquote(key).lower() in SECRET_PARAMETERS]
    _, scheme, rest = base.partition("://")
    authority = rest.split("/", 1)[0]
    user, at, _ = authority.rpartition("@")  # the last `@`: a password may hold one unencoded
    if scheme and at and ":" in user:
        found.append(user.split(":", 1)[1])
    # A secret's first `@` is where libpq may take the host to begin: that part alone is a secret as well.
    found += [s.split("@", 1)[0] for s in found if "@" in s]
    return sorted({form for s in found if s for form in (s, unquote(s))}, key=len, reverse=True)


def redact_text(text: str, url: str) -> str:
    """`text` (an error message, a log line) with `url` in it shown as `redact` shows it and every secret of
    `url` elsewhere in it (a fragment libpq quotes) read as `HIDDEN`."""
    hidden = secrets(url)
    if not hidden:
        return text
    text = text.replace(url, redact(url))
    for secret in hidden:
        text = text.replace(secret, HIDDEN)
    return text
