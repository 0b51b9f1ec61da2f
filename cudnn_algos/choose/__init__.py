"""Choosing a configuration for a problem no search has measured, at run time: the selector's model file and its
inference (``model``: Selector, Neighbours; ``features``; ``trees``; ``evidence``: what the training problems
measured, near a new one), and what apply()'s unseen-problem handler does
with it (``unseen``: the handler; ``lists_process``: cuDNN's lists asked, and the candidates ranked, in a helper
process; ``ranking``: candidates and measure_top_k's shortlist; ``shortlist_clock``: the shortlist built and timed).
Training and evaluating a selector is ``cudnn_algos.selector``."""
from .features import PROBLEM_FEATURES, Vocabulary, problem_features, row_features
from .model import Neighbours, Selector
from .trees import Trees

__all__ = ["PROBLEM_FEATURES", "Vocabulary", "problem_features", "row_features", "Neighbours", "Selector", "Trees"]
