"""The paper's numbered results and figures, and which result each proof uses (data, no Sphinx).

``RESULTS``: id -> (short name, what it says, the chapter that states it, the label of its statement
or None). ``USES``: (a, b) when the proof of b uses a (for a figure: the result it illustrates).
Read by the Sphinx extension :mod:`claims_ledger` and by the tests.
"""

RESULTS = {
    "def-1": ("Def. 1", "projected gradient descent on the spheres", "book/pgd", "def-1"),
    "assumption-1": ("Assumption 1", "k* and v* are orthogonal", "book/task", "assumption-1"),
    "sec-2.1": ("Sec. 2.1", "the single-location regression task", "book/task", "def-slr"),
    "sec-2.2": ("Sec. 2.2", "linear probes of [CLS]", "book/probe", None),
    "eq-1": ("Eq. (1)", "the oracle argmax predictor", "book/attention", None),
    "eq-2": ("Eq. (2)", "its softmax relaxation", "book/attention", None),
    "eq-3": ("Eq. (3)", "the erf predictor", "book/attention", None),
    "thm-1": ("Thm. 1", "the oracle risk in closed form", "book/oracle", "thm-1"),
    "cor-2": ("Cor. 2", "the oracle risk tends to the Bayes risk", "book/oracle", "cor-2"),
    "prop-3": ("Prop. 3", "the best linear predictor and its risk", "book/linear", "prop-3"),
    "lemma-4": ("Lemma 4", "the manifold M is invariant under PGD", "book/pgd", "lem-4"),
    "thm-5": ("Thm. 5", "PGD started on M converges to the oracle", "book/pgd", "thm-5"),
    "lemma-6": ("Lemma 6", "the risk on M", "book/oracle", "lem-6"),
    "lemma-7": ("Lemma 7", "PGD on M as a map of (kappa, nu)", "book/pgd", "lem-7"),
    "prop-8": ("Prop. 8", "the risk decreases along PGD", "book/proofs", "prop-8"),
    "prop-9": ("Prop. 9", "the five fixed points on M", "book/pgd", "prop-9"),
    "prop-10": ("Prop. 10", "minima, maxima and the saddle", "book/pgd", "prop-10"),
    "prop-11": ("Prop. 11", "the iterates converge to a fixed point", "book/proofs", "prop-11"),
    "prop-12": ("Prop. 12", "the map is a local diffeomorphism", "book/proofs", "prop-12"),
    "prop-13": ("Prop. 13", "bad starts have measure zero", "book/proofs", "prop-13"),
    "lemma-14": ("Lemma 14", "the gradient keeps the span", "book/proofs", "lem-14"),
    "prop-15": ("Prop. 15", "the risk off M in closed form", "book/proofs", "prop-15"),
    "lemma-16": ("Lemma 16", "bounds on the Gaussian-erf functions", "book/proofs", "lem-16"),
    "lemma-17": ("Lemma 17", "properties of zeta", "book/proofs", "lem-17"),
    "lemma-18": ("Lemma 18", "Gaussian-erf identities", "book/proofs", "lem-18"),
    "eq-29": ("Eq. (29)", "a Transformer layer with a register token", "book/transformer", None),
    "eq-30": ("Eq. (30)", "regression on several locations", "book/transformer", None),
    "fig-1b": ("Fig. 1(b)", "probing [CLS] on sentiment", "book/probe", "fig-paper-1b"),
    "fig-3": ("Fig. 3", "linear against attention", "book/linear", "fig-paper-3"),
    "fig-4a": ("Fig. 4(a)", "PGD from a uniform start", "book/pgd", "fig-paper-4a"),
    "fig-4b": ("Fig. 4(b)", "PGD started on M", "book/pgd", "fig-paper-4b"),
    "fig-5": ("Fig. 5", "stochastic PGD", "book/pgd", "fig-paper-5"),
    "fig-7a": ("Fig. 7(a)", "a large constant lambda", "book/pgd", "fig-paper-7a"),
    "fig-7b": ("Fig. 7(b)", "a small constant lambda", "book/pgd", "fig-paper-7b"),
    "fig-8": ("Fig. 8", "a Transformer layer learns k* and v*", "book/transformer", "fig-paper-8"),
    "fig-9": ("Fig. 9", "two heads, two locations", "book/transformer", "fig-paper-9"),
    "fig-10": ("Fig. 10", "a two-head Transformer layer", "book/transformer", "fig-paper-10"),
}

USES = [
    ("sec-2.1", "eq-1"), ("eq-1", "eq-2"), ("eq-2", "eq-3"), ("eq-3", "thm-1"), ("sec-2.1", "prop-3"),
    ("eq-29", "fig-8"), ("eq-29", "fig-10"), ("eq-30", "fig-9"), ("eq-30", "fig-10"),
    ("sec-2.2", "fig-1b"), ("assumption-1", "thm-1"),
    ("lemma-18", "lemma-6"), ("lemma-18", "prop-15"), ("lemma-17", "lemma-18"),
    ("lemma-6", "thm-1"), ("assumption-1", "lemma-6"), ("assumption-1", "prop-3"),
    ("thm-1", "cor-2"), ("lemma-17", "cor-2"), ("lemma-18", "cor-2"),
    ("prop-15", "lemma-14"), ("lemma-14", "lemma-4"), ("lemma-6", "lemma-4"), ("def-1", "lemma-4"),
    ("lemma-4", "lemma-7"), ("lemma-6", "lemma-7"),
    ("lemma-7", "prop-8"), ("lemma-16", "prop-8"),
    ("lemma-6", "prop-9"), ("prop-9", "prop-10"),
    ("prop-8", "prop-11"), ("prop-9", "prop-11"),
    ("lemma-7", "prop-12"), ("lemma-16", "prop-12"),
    ("prop-8", "prop-13"), ("prop-10", "prop-13"), ("prop-12", "prop-13"),
    ("prop-11", "thm-5"), ("prop-13", "thm-5"),
    ("thm-1", "fig-3"), ("prop-3", "fig-3"),
    ("thm-5", "fig-4a"), ("prop-15", "fig-4a"), ("thm-5", "fig-4b"), ("def-1", "fig-5"),
    ("prop-15", "fig-7a"), ("prop-15", "fig-7b"),
]


def check():
    """Every edge joins two known results, and the graph has no cycle (a proof cannot use itself)."""
    for a, b in USES:
        if a not in RESULTS or b not in RESULTS:
            raise ValueError(f"USES names an unknown result: {(a, b)}")
    state = {}

    def visit(n):
        if state.get(n) == 1:
            raise ValueError(f"USES has a cycle through {n}")
        if state.get(n) != 2:
            state[n] = 1
            for a, b in USES:
                if a == n:
                    visit(b)
            state[n] = 2
    for n in RESULTS:
        visit(n)
