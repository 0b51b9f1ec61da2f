"""A selector that needs no search: a configuration ranked by a model trained on measured problems (features,
model, train); see docs/dataset.md for the data it learns from."""
from .features import PROBLEM_FEATURES, Vocabulary, problem_features, row_features
from .model import Neighbours, Selector
from .trees import Trees

__all__ = ["PROBLEM_FEATURES", "Vocabulary", "problem_features", "row_features", "Neighbours", "Selector", "Trees"]
