"""slr.book: glue many values at once as plain Python numbers, bounds rounded outwards for prose, Markdown tables,
timings without the cache."""
import decimal
import os

import jax.numpy as jnp
import myst_nb
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from slr import book, cache


@pytest.fixture
def glued(monkeypatch):
    calls = []
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: calls.append((name, value, display)))
    return calls


def test_plain_turns_numpy_and_jax_scalars_into_python_numbers():
    cases = [(np.float64(0.25), float), (np.float32(0.5), float), (np.int64(3), int), (np.bool_(True), bool),
             (jnp.float64(1.5), float), (jnp.asarray(7), int), (np.array(2.0), float), (np.complex128(1j), complex)]
    for value, kind in cases:
        out = book.plain(value)
        assert type(out) is kind and out == value
        assert format(out, "") == format(kind(value), "")
    assert format(book.plain(np.float64(1 / 3)), ".3f") == "0.333"     # what {glue:text}`x:.3f` does
    for same in ("text", 3, 2.5, None):
        assert book.plain(same) is same
    arr = np.arange(3.0)
    assert book.plain(arr) is arr


def test_glue_many_values_hidden_in_one_call(glued):
    out = book.glue({"a": np.float64(0.5)}, b=np.int64(2), c="all")
    assert out is None                      # a cell ending with a glue displays nothing
    assert glued == [("a", 0.5, False), ("b", 2, False), ("c", "all", False)]
    assert type(glued[0][1]) is float and type(glued[1][1]) is int
    glued.clear()
    book.glue(t_kappa=jnp.asarray(12), prefix="fig4a_")
    assert glued == [("fig4a_t_kappa", 12, False)]


def test_glue_refuses_bad_names(glued):
    with pytest.raises(ValueError, match="glue names"):
        book.glue({"a b": 1})
    with pytest.raises(ValueError, match="prefix"):
        book.glue(prefix=3, a=1)
    assert glued == []


def test_markdown_table_from_dict_rows_and_sequences():
    md = book.markdown_table({"train": {"n": 15552, "acc": np.float64(0.99951)}, "test": {"n": 4608}},
                             index="set")
    assert md.splitlines() == ["| set | n | acc |", "|---|---|---|", "| train | 15552 | 1.000 |", "| test | 4608 |  |"]
    md = book.markdown_table({0: [0.5, 0.25], "mean": ["**0.375**", "a|b"]}, columns=["x", "y"], fmt="{:.2f}")
    assert md.splitlines()[2:] == ["| 0 | 0.50 | 0.25 |", "| mean | **0.375** | a\\|b |"]
    assert book.table({"r": {"c": 1}}).data == book.markdown_table({"r": {"c": 1}})
    with pytest.raises(ValueError, match="columns"):
        book.markdown_table({"r": [1, 2]})
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        book.markdown_table({"r": [1, 2]}, columns=["a", "b", "c"])
    with pytest.raises(ValueError, match="at least one row"):
        book.markdown_table({})


def test_timed_bypasses_the_cache_without_touching_the_environment(result_cache):
    env = dict(os.environ)
    seen = []

    def compute(x, *, scale=1.0):
        seen.append(cache.enabled())
        return cache.memoize("book-timed", {"x": x, "scale": scale}, lambda: {"y": np.asarray(x) * scale})

    out, seconds = book.timed(compute, 3.0, scale=2.0)
    assert out["y"] == 6.0 and seconds >= 0.0 and seen == [False]
    assert dict(os.environ) == env and cache.enabled()
    assert not list(result_cache.glob("*.npz"))                   # nothing stored, nothing read


def test_timed_parts_counts_the_compilation_once(result_cache):
    """A program compiled inside the call counts as compilation; the same program called again compiles
    nothing (control: the first call's compilation is seen, so a zero is not the listener missing it)."""
    import time

    import jax

    c = float(time.time_ns() % 1_000_003)  # a constant of the program: JAX's persistent cache never has it
    f = jax.jit(lambda x: jnp.cumsum(jnp.sin(x) * c) @ x[::-1])
    x = jnp.linspace(0.0, 1.0, 173)
    first, s1, c1 = book.timed_parts(f, x)
    again, s2, c2 = book.timed_parts(f, x)
    assert c1 > 0.0 and s1 >= c1                       # the compilation, inside the call's time
    assert c2 == 0.0 and s2 >= 0.0 and float(first) == float(again)
    with pytest.raises(ZeroDivisionError):              # an error inside passes through
        book.timed_parts(lambda: 1 / 0)
    assert book.timed_parts(f, x)[2] == 0.0


@given(x=st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).filter(lambda x: abs(x) > 1e-300),
       digits=st.integers(0, 5), kind=st.sampled_from("fe%"), side=st.sampled_from(["at most", "at least"]))
@settings(max_examples=300, deadline=None)
def test_bound_quotes_a_true_bound_one_digit_off(x, digits, kind, side):
    """What the prose shows, parsed back, is a bound on the value on the stated side, and no further
    from it than one unit of the last digit shown."""
    fmt = f".{digits}{kind}"
    shown_text = format(book.bound(x, fmt, side), fmt)
    # compared in decimal, in the unit the prose shows (percent for '%'), with x as the shortest
    # decimal that reads back as x: float division would move 11.9% off 0.119 by one ulp
    scale = 100 if kind == "%" else 1
    value = decimal.Decimal(repr(x)) * scale
    shown = decimal.Decimal(shown_text.rstrip("%"))
    assert (shown >= value) if side == "at most" else (shown <= value)
    plain_text = format(x, fmt)
    if kind == "e":   # one unit of the last digit of the shown mantissa (its exponent may have moved)
        unit = decimal.Decimal(1).scaleb(int(shown_text.split("e")[1]) - digits)
    else:
        unit = decimal.Decimal(1).scaleb(-digits)
    assert abs(shown - value) <= unit
    if decimal.Decimal(plain_text.rstrip("%")) == value:
        assert shown_text == plain_text          # nothing to round: the plain format


def test_bound_rounds_outwards_and_checks_its_arguments():
    assert format(book.bound(0.4823, ".2f", "at most"), ".2f") == "0.49"
    assert format(book.bound(0.4823, ".2f", "at least"), ".2f") == "0.48"
    assert format(book.bound(3.198e-10, ".0e", "at most"), ".0e") == "4e-10"
    assert format(book.bound(6.97, ".1f", "at least"), ".1f") == "6.9"
    assert format(book.bound(np.float32(0.25), ".1%", "at most"), ".1%") == "25.0%"
    for args, name in (((0.1, "2f", "at most"), "fmt"), ((0.1, ".2g", "at most"), "fmt"),
                       ((0.1, ".2f", "up"), "side"), ((float("nan"), ".2f", "at most"), "value"),
                       ((np.inf, ".2f", "at least"), "value"), (("0.1", ".2f", "at most"), "value")):
        with pytest.raises(ValueError, match=name):
            book.bound(*args)
