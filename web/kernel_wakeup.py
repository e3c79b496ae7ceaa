"""A notebook client that cannot sleep through a kernel's reply.

nbclient (the book build's executor through jupyter-cache, and ``benchmarks/time_chapters.py`` and
``benchmarks/audit_seeds.py``) waits for a kernel's messages with asyncio zmq sockets, and
``jupyter_client``'s ``AsyncZMQSocketChannel.get_msg`` makes one ``poll`` with the whole timeout (no
timeout at all on the output channel). A zmq socket tells the event loop that a message arrived through
an edge-triggered file descriptor; when that edge is consumed elsewhere, the message sits in the socket
and the poll never wakes: the client waits and the kernel, idle, waits for the next request.

Seen in ``pgd`` during a seed audit (2026-11-29), right after the chapter's ``ipywidgets`` cell (the many
widget messages that cell sends): 45 cells executed, the kernel idle, the client's shell and output sockets
both reporting a pending message through ``zmq.EVENTS`` (3 and 1), for more than ten minutes; reading
``EVENTS`` from a debugger woke the client, which finished the chapter. A run of ``linear`` (also a
chapter with a widget cell, outside the test suite) had hung the same way before, its cell not recorded.
Hangs after widget cells are reported upstream (jupyter/nbclient#312, "when cell contains ipywidget,
execute cell will sometimes blocks").

:func:`install` makes every ``get_msg`` wait in slices of at most :data:`SLICE` seconds: each slice is a
new ``poll``, and pyzmq checks ``zmq.EVENTS`` when a poll starts, so a message left behind is read at
the next slice instead of never. The overall timeout is unchanged. It is a Sphinx extension (the book
build, ``_config.yml``) and the two benchmark scripts call it; nbval uses jupyter_client's blocking
client, whose ``zmq_poll`` reads the socket's state and does not depend on the edge.
"""
from __future__ import annotations

import time
from queue import Empty

from jupyter_client.channels import AsyncZMQSocketChannel

SLICE = 1.0  # seconds: the longest a message already in the socket can wait to be read
_MARK = "_slr_sliced"


def sliced(get_msg):
    """``get_msg`` (an ``AsyncZMQSocketChannel`` method) made to wait in slices of at most ``SLICE``
    seconds, with the caller's overall ``timeout`` (``None``: no limit) and its ``Empty`` at the end."""
    async def get_msg_sliced(self, timeout: float | None = None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await get_msg(self, SLICE if left is None else min(SLICE, left))
            except Empty:
                if left is not None and left <= SLICE:
                    raise

    setattr(get_msg_sliced, _MARK, True)
    get_msg_sliced.__wrapped__ = get_msg
    get_msg_sliced.__doc__ = get_msg.__doc__
    return get_msg_sliced


def install() -> None:
    """Patch ``AsyncZMQSocketChannel.get_msg`` for this process (once; a second call does nothing)."""
    if not getattr(AsyncZMQSocketChannel.get_msg, _MARK, False):
        AsyncZMQSocketChannel.get_msg = sliced(AsyncZMQSocketChannel.get_msg)


def setup(app):
    install()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
