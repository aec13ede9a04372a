"""A small client of the Kubernetes API over HTTPS, with the standard library only.

Why not the official ``kubernetes`` package (measured here, 36.0.3 for 1.36
servers): importing ``kubernetes.client`` takes 0.5 to 0.6 s against 0.08 s for
``urllib``/``ssl``/``json``; it brings 13 packages (aiohttp among them), and it
requires a newer PyYAML than the one the project pins. fidelnet needs a handful of
REST calls (create, get, replace, patch, delete, list), which this module makes on
paths the caller spells out (:func:`path`); watches and discovery are not here.

A request that fails raises :class:`KubeError` with the HTTP status, the API's
``reason`` (``NotFound``, ``AlreadyExists``, ``Conflict``, ...) and message;
connection errors raise it with status 0. :func:`poll` waits, bounded, until a
check holds, and says what it last saw when it does not.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from fidelnet.errors import FidelnetError

__all__ = ["Kube", "KubeError", "KubeTimeoutError", "path", "poll"]

T = TypeVar("T")
Json = dict[str, Any]


class KubeError(FidelnetError):
    """An API request failed: ``METHOD PATH: STATUS REASON: message``."""

    def __init__(self, method: str, url_path: str, status: int, reason: str, message: str) -> None:
        self.method = method
        self.path = url_path
        self.status = status
        self.reason = reason
        self.message = message
        code = f"{status} {reason}" if status else reason
        super().__init__(f"{method} {url_path}: {code}: {message}")


class KubeTimeoutError(FidelnetError):
    """:func:`poll` ran out of time; ``last`` is what the last look saw."""

    def __init__(self, what: str, seconds: float, last: str) -> None:
        self.what = what
        self.seconds = seconds
        self.last = last
        super().__init__(f"{what}: not within {seconds:.0f} s (last seen: {last})")


def path(
    api_version: str,
    plural: str,
    name: str | None = None,
    *,
    namespace: str | None = None,
    sub: str | None = None,
) -> str:
    """The REST path of a resource: ``path("v1", "pods", "p", namespace="default")``
    is ``/api/v1/namespaces/default/pods/p``; a group's resources are under
    ``/apis/GROUP/VERSION``; ``sub`` is a subresource (``status``)."""
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    parts = [base]
    if namespace is not None:
        parts.append(f"namespaces/{urllib.parse.quote(namespace, safe='')}")
    parts.append(plural)
    if name is not None:
        parts.append(urllib.parse.quote(name, safe=""))
        if sub is not None:
            parts.append(sub)
    return "/".join(parts)


class Kube:
    """One API server, one bearer token. Thread-safe (each call is one request)."""

    def __init__(
        self,
        server: str,
        token: str,
        *,
        ca_pem: str | None = None,
        insecure: bool = False,
        timeout: float = 30.0,
    ) -> None:
        self.server = server.rstrip("/")
        self._token = token
        self.timeout = timeout
        ctx: ssl.SSLContext | None
        if insecure:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx = ssl.create_default_context(cadata=ca_pem) if ca_pem else None
        self._ssl = ctx

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str, *, timeout: float = 30.0) -> Kube:
        """The current context of a kubeconfig file (JSON or YAML) whose user has a
        bearer token (``token`` or ``tokenFile``)."""
        with open(kubeconfig, encoding="utf-8") as f:
            text = f.read()
        try:
            config = json.loads(text)
        except json.JSONDecodeError:
            import yaml

            config = yaml.safe_load(text)
        try:
            current = config["current-context"]
            ctx = _named(config["contexts"], current)["context"]
            cluster = _named(config["clusters"], ctx["cluster"])["cluster"]
            user = _named(config["users"], ctx["user"])["user"]
        except (KeyError, TypeError) as exc:
            raise FidelnetError(f"{kubeconfig}: not a usable kubeconfig ({exc})") from exc
        token = user.get("token")
        if token is None and "tokenFile" in user:
            with open(user["tokenFile"], encoding="utf-8") as f:
                token = f.read().strip()
        if not token:
            raise FidelnetError(f"{kubeconfig}: user {ctx['user']!r} has no bearer token")
        ca = None
        if "certificate-authority-data" in cluster:
            ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        elif "certificate-authority" in cluster:
            with open(cluster["certificate-authority"], encoding="utf-8") as f:
                ca = f.read()
        return cls(
            cluster["server"],
            token,
            ca_pem=ca,
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
            timeout=timeout,
        )

    def request(
        self,
        method: str,
        url_path: str,
        body: Mapping[str, Any] | None = None,
        *,
        query: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> Any:
        """One request; the decoded JSON answer (a string when it is not JSON).
        ``accept`` asks for another form (a Table: the printer columns)."""
        url = self.server + url_path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self._token}")
        req.add_header("Accept", accept)
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._ssl) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            reason, message = exc.reason, raw.decode("utf-8", "replace").strip()
            try:
                status = json.loads(raw)
                reason = status.get("reason") or reason
                message = status.get("message") or message
            except (json.JSONDecodeError, AttributeError):
                pass
            raise KubeError(method, url_path, exc.code, str(reason), message) from exc
        except (urllib.error.URLError, OSError) as exc:
            why = getattr(exc, "reason", exc)
            raise KubeError(method, url_path, 0, "Unreachable", str(why)) from exc
        text = raw.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text

    def get(self, url_path: str, **query: str) -> Json:
        out: Json = self.request("GET", url_path, query=query or None)
        return out

    def create(self, collection: str, obj: Mapping[str, Any]) -> Json:
        out: Json = self.request("POST", collection, obj)
        return out

    def replace(self, url_path: str, obj: Mapping[str, Any]) -> Json:
        out: Json = self.request("PUT", url_path, obj)
        return out

    def patch(self, url_path: str, patch: Mapping[str, Any]) -> Json:
        """A JSON merge patch (RFC 7386)."""
        out: Json = self.request(
            "PATCH", url_path, patch, content_type="application/merge-patch+json"
        )
        return out

    def delete(self, url_path: str, *, propagation: str | None = None) -> Json:
        """Delete; ``propagation`` is ``Foreground``, ``Background`` or ``Orphan``
        (the garbage collector's policy for what the object owns)."""
        body = {"propagationPolicy": propagation} if propagation else None
        out: Json = self.request("DELETE", url_path, body)
        return out

    def exists(self, url_path: str) -> bool:
        try:
            self.request("GET", url_path)
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def apply(self, collection: str, obj: Mapping[str, Any]) -> Json:
        """Create ``obj`` in ``collection``, or replace the one of the same name
        (with its current resourceVersion)."""
        try:
            return self.create(collection, obj)
        except KubeError as exc:
            if exc.status != 409:
                raise
        item = f"{collection}/{urllib.parse.quote(obj['metadata']['name'], safe='')}"
        current = self.get(item)
        merged = dict(obj)
        merged["metadata"] = {
            **obj["metadata"],
            "resourceVersion": current["metadata"]["resourceVersion"],
        }
        return self.replace(item, merged)


def _named(items: list[Json], name: str) -> Json:
    for item in items:
        if item.get("name") == name:
            return item
    raise KeyError(name)


def poll(
    check: Callable[[], tuple[T | None, str]],
    *,
    what: str,
    timeout: float,
    interval: float = 0.2,
) -> T:
    """Call ``check`` until it returns a value that is not None (and return that),
    at most ``timeout`` seconds; ``check`` also returns what it saw, which a
    :class:`KubeTimeoutError` quotes. A :class:`KubeError` from ``check`` counts as a
    look that saw that error."""
    deadline = time.monotonic() + timeout
    last = "nothing yet"
    while True:
        try:
            value, last = check()
        except KubeError as exc:
            value, last = None, str(exc)
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            raise KubeTimeoutError(what, timeout, last)
        time.sleep(interval)
