"""Who answered a `verify --json`: the host's name, the node a scheduler calls it, the lock's group.

A fleet's results come back as files and log lines from many machines; `gpuresolve fleet report`
names each by ``host.node`` (``GPURESOLVE_NODE_NAME``, which a Kubernetes manifest sets from the
downward API's ``spec.nodeName``, else Slurm's ``SLURMD_NODENAME``), else ``host.hostname`` (in a
pod: the pod's name), and groups them by ``group``, the lock set the file records it belongs to.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from resolver.core.documents.reports import VerifyDoc

NODE_ENV = ("GPURESOLVE_NODE_NAME", "SLURMD_NODENAME")
# A node's name as Kubernetes (a DNS subdomain) or Slurm (NodeName) spells it: nothing that could
# reach a terminal or a file name as something else.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
_GROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")


def safe_name(value: object) -> str | None:
    """``value`` when it is a plausible host or node name, else None (never echoed raw)."""
    return value if isinstance(value, str) and _NAME.fullmatch(value) else None


def safe_group(value: object) -> str | None:
    """``value`` when it is a group name gpuresolve writes (``name`` or ``name/platform``)."""
    if not isinstance(value, str) or not _GROUP.fullmatch(value) or ".." in value.split("/"):
        return None
    return value


def hostname() -> str | None:
    try:
        return safe_name(socket.gethostname())
    except OSError:
        return None


def node_name(environ: Mapping[str, str]) -> str | None:
    """The scheduler's name for this machine: the first of ``NODE_ENV`` set to a valid name."""
    for key in NODE_ENV:
        found = safe_name(environ.get(key))
        if found:
            return found
    return None


def add_identity(data: VerifyDoc, group: str | None, environ: Mapping[str, str]) -> None:
    """``host.hostname``, ``host.node`` and ``group`` (the lock's, ``recorded.lock_group``) added
    to a verify report (keys only added: with no host detected, ``host`` holds just these two)."""
    host = data.get("host")
    if host is None:
        data["host"] = {"hostname": hostname(), "node": node_name(environ)}
    else:
        host["hostname"] = hostname()
        host["node"] = node_name(environ)
    data["group"] = safe_group(group)
