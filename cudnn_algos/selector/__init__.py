"""Training and evaluating a selector that needs no search (``train``, ``rank``: LambdaMART; ``report``: a model
report's layers scored); the trained model itself and its inference are ``cudnn_algos.choose`` (re-exported here);
docs/dataset.md describes the data it learns from."""
from ..choose import PROBLEM_FEATURES, Neighbours, Selector, Trees, Vocabulary, problem_features, row_features

__all__ = ["PROBLEM_FEATURES", "Vocabulary", "problem_features", "row_features", "Neighbours", "Selector", "Trees"]
