"""The GETs of a remote fetch: each connection goes to an address checked once, never to a name resolved again.

A remote source names a host; whoever runs its DNS decides what the name resolves to, and may answer
differently each time it is asked (DNS rebinding). So a fetch resolves each host once (`_Route.admit`), checks
every address it got, and its connections go to those addresses only (the name still goes in the Host header
and, over https, in the TLS server name the certificate is checked against). The checks:

- A special address (link-local, where cloud metadata services answer: 169.254.169.254, fe80::/10; a known
  metadata service's own address; unspecified, 0.0.0.0/8 and ::; multicast; reserved) is reached only when the
  user's URL names that exact address: never through a name, nor through a redirect to any other host.
- Every other address is on this machine, a private network or the Internet (`_REACH`); a redirect may go to
  another host only on the kind of network the fetch started on (a tarball host on the Internet must not send
  the fetch to this machine or the local network; a mirror on this machine must not send it out).

A proxy the user set (`https_proxy` / `http_proxy`, minus `no_proxy`) is used: it is the user's choice of how
to reach the network. Through it, a host this machine can resolve is checked as above, a host it cannot (a
network that resolves outside names only at its proxy) is left to the proxy and counted as on the Internet, and
a host named by its address is checked as above: the proxy, not this machine, then chooses where the name goes.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urljoin, urlsplit

from codeloupe.errors import RemoteError
from codeloupe.settings import Settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_REACH = ("this machine", "a private network", "the Internet")
# Cloud metadata services outside the link-local ranges: AWS's IPv6 endpoint (a unique-local address) and
# Alibaba Cloud's (in the carrier-grade NAT range). The link-local ones (169.254.169.254, 169.254.170.2, ...)
# are refused as link-local.
_METADATA_SERVICES = frozenset(ipaddress.ip_address(a) for a in ("fd00:ec2::254", "100.100.100.200"))
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")  # "this host on this network": Linux connects it to this machine
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries to its destination (mapped, 6to4, NAT64), if any."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped or address.sixtofour:
        return address.ipv4_mapped or address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def special(address: Address) -> str:
    """Why no name or redirect may lead to this address ("" when it is an ordinary one)."""
    inner = _embedded_ipv4(address)
    if inner is not None:
        return special(inner)
    if address in _METADATA_SERVICES:
        return "a cloud metadata service"
    if address.is_link_local:
        return "link-local (where cloud metadata services answer)"
    if address.is_unspecified or address in _THIS_NETWORK:
        return "unspecified (0.0.0.0/8 or ::)"
    if address.is_multicast:
        return "multicast"
    if address.is_loopback:
        return ""
    if address.is_reserved or (isinstance(address, ipaddress.IPv6Address) and address.is_site_local):
        return "reserved"
    return ""


def reach(address: Address) -> int:
    """Where an address is, as an index into `_REACH`. An unspecified one (0.0.0.0, ::), reached only where the
    URL names it, is this machine: Linux connects either to its loopback address."""
    inner = _embedded_ipv4(address)
    if inner is not None:
        return reach(inner)
    return 0 if address.is_loopback or address.is_unspecified else 2 if address.is_global else 1


def _address(text: str) -> Address:
    return ipaddress.ip_address(text.split("%", 1)[0])


def _proxy_host(proxy: str) -> str:
    """The host of a proxy setting as urllib reads it: a URL, or without `scheme://` the proxy's `[user@]host:port`
    (`http_proxy=proxy.example:3128`, which curl and pip take too)."""
    return (urlsplit(proxy if "://" in proxy else "//" + proxy).hostname or "").lower()


def bypasses_proxy(netloc: str) -> bool:
    """Whether the user's `no_proxy` sends a fetch to `netloc` (`host[:port]`) around their proxy. As urllib
    reads it (a name, a suffix of names, `name:port`, `*`), but an IPv6 address matches spelt with or without
    its brackets, in `no_proxy` and in the URL alike: urllib compared `no_proxy=::1` with a URL's `[::1]` and
    sent the fetch through the proxy (`no_proxy=[::1]` the other way round where the host came unbracketed).
    Without a `no_proxy`, the platform's own settings decide (macOS, Windows)."""
    no_proxy = urllib.request.getproxies_environment().get("no")
    if no_proxy is None:
        return bool(urllib.request.proxy_bypass(netloc))
    if no_proxy.strip() == "*":
        return True
    host, port = _host_and_port(netloc)
    for entry in no_proxy.split(","):
        name, only_port = _host_and_port(entry)
        name = name.lstrip(".")
        if name and (host == name or host.endswith("." + name)) and only_port in ("", port):
            return True
    return False


def _host_and_port(netloc: str) -> tuple[str, str]:
    """`host[:port]` as (host, port), lower-cased; an IPv6 host loses its brackets (`[::1]:8080`, `[::1]`), and
    one without them (`::1`) is all host."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        host, _, rest = netloc[1:].partition("]")
        return host, rest.removeprefix(":")
    if netloc.count(":") == 1:
        host, _, port = netloc.partition(":")
        return host, port
    return netloc, ""


class _UserProxies(urllib.request.ProxyHandler):
    """The user's proxies, `no_proxy` read by `bypasses_proxy`: the route's checks and the connection agree on
    which hosts are reached directly."""

    def proxy_open(self, req: Any, proxy: str, type: str) -> Any:  # noqa: A002 - urllib's parameter name
        if req.host and bypasses_proxy(req.host):
            return None
        return super().proxy_open(req, proxy, type)


class _Route:
    """One fetch's hosts, each resolved once: the addresses its connections may use, and the kind of network
    the fetch started on."""

    def __init__(self, url: str, proxies: dict[str, str] | None = None) -> None:
        try:
            self._named: Address | None = ipaddress.ip_address(urlsplit(url).hostname or "")
        except ValueError:
            self._named = None  # a name, not an address
        self._start: int | None = None
        self._hosts: dict[str, tuple[int, list[str]]] = {}  # host -> (its reach, the addresses to connect to)
        self._proxies = proxies or {}  # scheme -> the user's proxy URL
        self._proxy_hosts = {_proxy_host(p) for p in self._proxies.values()} - {""}

    def _through_proxy(self, url: str) -> bool:
        parts = urlsplit(url)
        return parts.scheme in self._proxies and not bypasses_proxy(parts.netloc.rpartition("@")[2])

    def admit(self, url: str) -> str:
        """Resolve `url`'s host (once per fetch) and check it: "" when the fetch may connect there (to the
        addresses checked, only), else why not. The first URL admitted is the one the fetch starts on."""
        host = (urlsplit(url).hostname or "").lower()
        if host not in self._hosts:
            why = self._resolve(host, urlsplit(url).port, self._through_proxy(url))
            if why:
                return why
        kind = self._hosts[host][0]
        if self._start is None:
            self._start = kind
        elif kind != self._start:
            return f"it is on {_REACH[kind]}, the URL on {_REACH[self._start]}"
        return ""

    def _resolve(self, host: str, port: int | None, proxied: bool = False) -> str:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            if proxied:  # resolved by the user's proxy only: it is connected to, never this host
                self._hosts[host] = (len(_REACH) - 1, [])
                return ""
            return f"{host}: cannot resolve it ({exc})"
        found = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not found:
            return f"{host}: it resolves to no address"
        for text in found:
            why = special(_address(text))
            if why and _address(text) != self._named:
                named = "" if self._named is None else f" (only {self._named}, which the URL names, may be)"
                return f"{host} is at {text}, {why}: such an address is never reached by name or redirect{named}"
        kind = min(reach(_address(text)) for text in found)
        self._hosts[host] = (kind, [text for text in found if reach(_address(text)) == kind])
        return ""

    def connect(self, address: tuple[str, int], timeout: Any, source_address: Any = None) -> socket.socket:
        """`socket.create_connection` for http.client, to the addresses `admit` checked for this host."""
        host, port = address
        admitted = self._hosts.get(host.lower().strip("[]"))
        if admitted is None and host.lower().strip("[]") in self._proxy_hosts:
            return socket.create_connection(address, timeout, source_address)  # the user's own proxy
        if admitted is None:
            raise RemoteError(f"{host}: not checked before connecting")  # every URL is admitted first
        error: OSError | None = None
        for text in admitted[1]:
            try:
                return socket.create_connection((text, port), timeout, source_address)
            except OSError as exc:
                error = exc
        raise error or OSError(f"{host}: no address to connect to")


class _Pinned:
    """A handler whose connections go to the addresses the route admitted (http.client's own hook for the
    socket it opens), the name kept for the Host header and TLS."""

    def __init__(self, route: _Route) -> None:
        super().__init__()
        self.route = route

    def do_open(self, http_class: type[http.client.HTTPConnection], req: Any, **kwargs: Any) -> Any:
        def pinned(host: str, **options: Any) -> http.client.HTTPConnection:
            connection = http_class(host, **options)
            connection._create_connection = self.route.connect  # type: ignore[attr-defined]
            return connection

        return super().do_open(pinned, req, **kwargs)  # type: ignore[misc]


class _PinnedHTTP(_Pinned, urllib.request.HTTPHandler):
    pass


class _PinnedHTTPS(_Pinned, urllib.request.HTTPSHandler):
    pass


class _GuardedRedirects(urllib.request.HTTPRedirectHandler):
    """Follows at most a few redirects, each only to http(s), never from https down to http, and only to a host
    the route admits. Checked on the Location before anything is sent there."""

    max_redirections = 5

    def __init__(self, route: _Route) -> None:
        super().__init__()
        self.route = route

    def http_error_302(self, req: Any, fp: Any, code: int, msg: str, headers: Any) -> Any:
        target = urljoin(req.full_url, headers.get("location") or headers.get("uri") or "")
        old, new = urlsplit(req.full_url), urlsplit(target)
        refused = f"{req.full_url}: refused the redirect to {target}"
        if new.scheme not in ("http", "https"):
            raise RemoteError(f"{refused}: not http(s)")
        if old.scheme == "https" and new.scheme != "https":
            raise RemoteError(f"{refused}: from https down to http")
        why = self.route.admit(target)
        if why:
            raise RemoteError(f"{refused}: {why}")
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        """The request to the redirect's target, without the user's proxy password: urllib copies every header
        of the old request, the proxy's credentials included, even to a host reached directly (`no_proxy`).
        Where the new request goes through the proxy, the proxy handler adds them again."""
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            new.remove_header("Proxy-authorization")  # as urllib's ProxyHandler spells it
        return new


def opener_for(url: str) -> urllib.request.OpenerDirector:
    """An opener for one fetch starting at `url`, which it admits first (`RemoteError` when refused)."""
    proxies = {scheme: proxy for scheme, proxy in urllib.request.getproxies().items() if scheme in ("http", "https")}
    route = _Route(url, proxies)
    why = route.admit(url)
    if why:
        raise RemoteError(f"{url}: refused: {why}")
    return urllib.request.build_opener(_UserProxies(proxies), _PinnedHTTP(route), _PinnedHTTPS(route),
                                       _GuardedRedirects(route))


def http_get(url: str, settings: Settings, limit: int, accept: str) -> bytes:
    """The body of a GET, at most `limit` bytes as sent (no content encoding is decoded on the way), whole (as
    long as its Content-Length says) and within `remote_deadline_s`."""
    deadline = time.monotonic() + settings.remote_deadline_s
    opener = opener_for(url)
    request = urllib.request.Request(url, headers={"Accept": accept, "Accept-Encoding": "identity",
                                                   "User-Agent": "codeloupe"})
    body = bytearray()
    try:
        with opener.open(request, timeout=settings.remote_timeout_s) as response:
            encoding = (response.headers.get("Content-Encoding") or "identity").lower()
            if encoding != "identity":
                raise RemoteError(f"{url}: sent with Content-Encoding {encoding!r}; only plain bodies are read")
            declared = response.headers.get("Content-Length") or ""
            if declared.isdigit() and int(declared) > limit:
                raise RemoteError(f"{url}: {declared} bytes is over the download bound of {limit}")
            while len(body) <= limit:
                if time.monotonic() > deadline:
                    raise RemoteError(f"{url}: not received within remote_deadline_s ({settings.remote_deadline_s:g}"
                                      f" s; {len(body)} bytes had come)")
                piece = response.read1(min(1 << 16, limit + 1 - len(body)))
                if not piece:
                    break
                body += piece
    except urllib.error.HTTPError as exc:
        raise RemoteError(f"{url}: HTTP {exc.code}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        if isinstance(exc, RemoteError):
            raise
        raise RemoteError(f"{url}: {getattr(exc, 'reason', None) or exc}") from exc
    if len(body) > limit:
        raise RemoteError(f"{url}: over the download bound of {limit} bytes")
    if declared.isdigit() and len(body) < int(declared):
        raise RemoteError(f"{url}: the connection ended after {len(body)} of the {declared} bytes it announced")
    return bytes(body)
