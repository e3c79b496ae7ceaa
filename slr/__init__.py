"""slr: single-location regression, the library behind *The Single-Location Regression Book*.

A companion to Marion, Berthier, Biau & Boyer, "Attention layers provably solve single-location
regression" (ICLR 2025). One idea per module:

- :mod:`slr.task`        the data distribution SLR(k_star, v_star) (Section 2.1) and its multi-location cousin
- :mod:`slr.predictors`  the oracle argmax (Eq. 1), softmax (Eq. 2) and erf (Eq. 3) predictors; sums of heads (Eq. 31)
- :mod:`slr.gaussian`    Gaussian-erf identities: phi, zeta (Owen's T) and their derivatives (Lemma 18)
- :mod:`slr.overlaps`    the five overlaps (Section 3), distance to M, the 4-D frame, vectors with given overlaps
- :mod:`slr.risk`        the erf predictor's closed-form risk: Prop. 15 (off M), Lemma 6 (on M), Theorem 1
- :mod:`slr.other_risks` the other predictors' risks: Prop. 3 (linear), affine, linear and softmax attention, Eq. (31)
- :mod:`slr.pgd`         exact projected gradient descent (Definition 1), batched over starts and per-run parameters
- :mod:`slr.sgd`         THE stochastic PGD trainer: any predictor, H heads, n_loc locations (Figures 5 and 9)
- :mod:`slr.reduced`     the exact-in-law reduced samplers: one head (Figure 5), H erf heads with the heads in R^d
- :mod:`slr.coordinates` erf heads' stochastic PGD in frame coordinates, exact in law, free of d (Figure 9)
- :mod:`slr.manifold`    the map on M (Lemma 7), fixed points (Props. 9-10), Jacobian (Prop. 12), Hessian, step-size bound
- :mod:`slr.experiments` the paper's figures as named frozen configurations
- :mod:`slr.sentences`   the sentence sets of the probing experiment (Appendix E.1)
- :mod:`slr.encoder`     the pretrained encoder of Section 2.2, loaded offline: [CLS] states at every layer
- :mod:`slr.probe`       the [CLS] probing experiment of Section 2.2 (Figure 1(b)): memoised states, probes
- :mod:`slr.transformer` a Transformer layer with a register token (Appendix E.3, Figures 8 and 10)
- :mod:`slr.transformer_train` its training program: the jitted SGD loop and the step's gradient by hand
- :mod:`slr.multihead`   Figure 9's configuration (Eq. 31 trained by :mod:`slr.sgd`)
- :mod:`slr.baselines`   the diagonal MLP of the related-models appendix, trained on the attention trainer's batches
- :mod:`slr.icl`         in-context linear regression and one-layer linear self-attention: the optima of each setting
- :mod:`slr.icl_train`   the linear self-attention layer trained by Adam from a random or a one-step-GD start
- :mod:`slr.icl_check`   Monte Carlo least squares over every linear self-attention layer (the optima checked)
- :mod:`slr.tuning`      the best inverse temperature at the oracle by 1-D minimisation; activations trained side by side
- :mod:`slr.recovery`    recovery from uniform starts: the temperature map, the time to recover against d
- :mod:`slr.flow`        the gradient flow of Definition 1 in the five overlaps (its alpha -> 0 limit), any d
- :mod:`slr.appendix_f`  the related-models appendix: attention against the diagonal MLP, both tuned
- :mod:`slr.landscape`   the risk off the manifold: the role-swapped stationary point, lambda_c(d)
- :mod:`slr.montecarlo`  the one Monte Carlo risk estimator (batched over points and lambda)
- :mod:`slr.claims`      checked claims with negative controls (the book's claims ledger)
- :mod:`slr.stats`       Wilson and Newcombe intervals, Fisher's test and its power, a trend test's power, the union bound
- :mod:`slr.exercises`   self-checking exercises: check(label, answer) says right or wrong
- :mod:`slr.checker`     an answer compared with a reference within a tolerance (the exercises' checkers)
- :mod:`slr.cache`       on-disk memoisation of expensive results, keyed by configuration and code
- :mod:`slr.book`        notebook helpers: glue many values at once, tables, timing
- :mod:`slr.plotting`    the book's house style
- :mod:`slr.diagrams`    drawn pictures: the schematic of one attention layer
- :mod:`slr.figcheck`    legends never cover data: every figure a chapter draws is measured
- :mod:`slr.loop`        the chunked step loop every trainer runs: logging, unrolling, blocked noise
- :mod:`slr.threefry`    JAX's threefry PRNG unrolled on CPU (registered on import): the same bits, faster

JAX runs in float64: the closed forms and the invariant-manifold distance need it (Lemma 4 is
visible at 1e-15 in float64 and hidden at 1e-6 in float32).
"""
import jax

jax.config.update("jax_enable_x64", True)

from slr import threefry  # noqa: E402,F401  threefry unrolled on CPU: the same bits, faster

__version__ = "0.1.0"
