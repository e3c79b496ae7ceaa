"""web/kernel_wakeup.py: a notebook client's wait for a kernel message survives a lost wake-up, keeps
its overall timeout, and executes a real chapter-like notebook (a widget cell) unchanged."""
import asyncio
import sys
import time
from pathlib import Path
from queue import Empty

import pytest
from jupyter_client.channels import AsyncZMQSocketChannel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "web"))
import kernel_wakeup as KW  # noqa: E402

ORIGINAL = getattr(AsyncZMQSocketChannel.get_msg, "__wrapped__", AsyncZMQSocketChannel.get_msg)


class LostWakeup:
    """A socket whose message arrives while the first poll waits and whose wake-up is lost: that poll
    sleeps out its whole timeout (forever without one) and finds nothing; every later poll starts by
    reading the socket's state and finds the message, as pyzmq's does. ``message=False``: none ever."""

    def __init__(self, message=True):
        self.message, self.polls = message, []

    async def poll(self, timeout_ms=None):
        self.polls.append(timeout_ms)
        if len(self.polls) == 1 or not self.message:
            await asyncio.sleep(3600 if timeout_ms is None else timeout_ms / 1000)
            return 0
        return 1


def channel(socket):
    ch = object.__new__(AsyncZMQSocketChannel)   # no zmq context: only get_msg's logic is under test
    ch.socket = socket

    async def recv(**kw):
        return {"content": "the reply"}

    ch._recv = recv
    return ch


def wait(coro, limit):
    return asyncio.run(asyncio.wait_for(coro, limit))


@pytest.mark.parametrize("timeout", [None, 30.0])
def test_a_message_left_in_the_socket_is_read_at_the_next_slice(monkeypatch, timeout):
    monkeypatch.setattr(KW, "SLICE", 0.2)
    sock = LostWakeup()
    t0 = time.monotonic()
    assert wait(KW.sliced(ORIGINAL)(channel(sock), timeout), 5.0) == {"content": "the reply"}
    assert time.monotonic() - t0 < 2.0 and sock.polls[0] == 200   # one slice, then the message
    # control: jupyter_client's own get_msg, one poll with the whole timeout, sleeps through it
    with pytest.raises(asyncio.TimeoutError):
        wait(ORIGINAL(channel(LostWakeup()), timeout), 2.0)


def test_the_overall_timeout_is_kept(monkeypatch):
    monkeypatch.setattr(KW, "SLICE", 0.2)
    sock = LostWakeup(message=False)
    t0 = time.monotonic()
    with pytest.raises(Empty):
        wait(KW.sliced(ORIGINAL)(channel(sock), 0.5), 5.0)
    assert 0.45 < time.monotonic() - t0 < 1.5
    assert sock.polls[:2] == [200, 200] and 0 <= sock.polls[-1] <= 100   # 0.2 + 0.2 + the rest


def test_install_patches_once(monkeypatch):
    monkeypatch.setattr(AsyncZMQSocketChannel, "get_msg", ORIGINAL)
    KW.install()
    patched = AsyncZMQSocketChannel.get_msg
    KW.install()
    assert AsyncZMQSocketChannel.get_msg is patched and patched.__wrapped__ is ORIGINAL


def test_a_widget_notebook_executes_with_the_patch(monkeypatch, tmp_path):
    """nbclient with the patch runs a notebook whose cell makes an ipywidgets explorer (as pgd and
    linear do), with every output and the widget state recorded."""
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setattr(AsyncZMQSocketChannel, "get_msg", ORIGINAL)
    KW.install()
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import ipywidgets as widgets\n"
                                  "def f(x):\n    print('x is', x)\n    return 2 * x\n"
                                  "w = widgets.interactive(f, x=widgets.IntSlider(value=3, max=9))\n"
                                  "display(w)"),
        nbformat.v4.new_code_cell("print(w.result)")])
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert nb.cells[1].outputs[0]["text"] == "6\n"
    assert "application/vnd.jupyter.widget-view+json" in nb.cells[0].outputs[0]["data"]
    assert nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
