"""The sparse-autoencoder family and its metrics.

    sae = TopKSAE(d_in=64, width=256, k=8)              # k-sparse decode and backward (fast=True, the default)
    sae = TopKSAE(d_in=64, width=256, k=8, fast=False)  # the dense reference, same math (or ReLUSAE(...))
    x_hat, z = sae(x)                                  # x: (..., d_in) -> reconstruction, codes (..., width)
    loss, metrics = sae.loss(x)                        # per-token squared error (+ sparsity penalty), logs
    fit_sae(sae, x, steps=1000, batch_size=512)        # AdamW, warmup-cosine, clipping via iclr26.train.fit

    ra = BatchTopKSAE(d_in=32, width=64, k=4, dictionary=RelaxedArchetypalDictionary(centroids, 64))  # RA-SAE

    tfa = TemporalSAE(d_in=64, width=256, k=4)         # Temporal Feature Analysis (Lubana et al.)
    x_hat, out = tfa(x_seq)                            # x_seq: (batch, time, d_in)
    z_pred, z_nov = out["pred_codes"], out["novel_codes"]

    tc = Transcoder(d_in=64, width=256, l1=3e-3)       # reads an MLP's input, writes its output (fit_transcoder)
    res = weightlens(W_E, W_U, {0: W_enc}, {0: W_dec}, acts_fn, bos=0)  # features from weights (WeightLens)
    loca = GroupedTopKSAE.from_topk(sae, groups, group_ks=[3, 2, 2, 1])  # a TopK per group of latents (LocA-SAE)
    z = ista(x, sae.dictionary, lam, steps=30, z0=sae.encode(x))      # per-sample inference on a fixed decoder

Metrics: :func:`fvu` (fraction of variance unexplained), :func:`nmse`, :func:`variance_explained`, :func:`l0`,
:func:`dead_fraction`, :func:`dense_fraction`, :func:`firing_rates`, :func:`dictionary_recovery` (Hungarian matching
against a planted dictionary), :func:`cosine_gram`, :func:`block_contrast` and :func:`step_change` (event
boundaries from centred code similarity, as the official TFA demo computes it), :func:`part_variance_explained` (the
demo's per-part variance explained), and
the pathology metrics of the LocA-SAE code: :func:`angular_variance`, :func:`absorption`, :func:`k_sparse_probe_f1`
and :func:`splitting` against binary feature labels.

Per-sample inference: :func:`ista` / :func:`fista` (non-negative or signed proximal gradient on
:func:`lasso_objective`, step ``1 / ||D||_2^2`` from :func:`spectral_norm_sq`) and :func:`calibrate_lambda`
(the penalty whose codes fire at a target density).

Decoder norms. A sparsity penalty on ``z`` can be dodged by shrinking ``z`` and growing the decoder rows, so
:class:`ReLUSAE` and :class:`TopKSAE` either keep unit-norm decoder rows by construction
(``decoder_norm="unit"``: the forward pass divides each row by its norm) or leave them free and weight the L1
penalty by the row norms (``decoder_norm="free"``, scale-invariant). :class:`TemporalSAE` follows the official
code: a tied dictionary ``D`` with free norms and a fixed encoder scale ``lam = 1 / (4 d_in)``; its input scale
comes from :func:`scaling_factor` (the official ``1 / mean ||x||`` by default) and :func:`fit_temporal_sae` ends its
cosine at the official ``min_lr`` (0.9 of the peak).

The real-model path (``paper`` scale) reads residual activations of a transformers causal LM with
:func:`iclr26.hf.residual_activations`, and :meth:`TemporalSAE.from_official` loads a released TFA checkpoint; planted
temporal data come from :func:`iclr26.data.planted_slow_fast`.

The package, one concept a file: :mod:`~iclr26.sae.dictionary` (ReLU and TopK SAEs), :mod:`~iclr26.sae.kernel` (the
k-sparse fast path), :mod:`~iclr26.sae.loca` (LocA-SAE), :mod:`~iclr26.sae.archetypal` (RA-SAE's dictionary),
:mod:`~iclr26.sae.batchtopk` (BatchTopK), :mod:`~iclr26.sae.temporal` (TFA),
:mod:`~iclr26.sae.training`, :mod:`~iclr26.sae.inference` (ISTA/FISTA), :mod:`~iclr26.sae.metrics`,
:mod:`~iclr26.sae.transcoder` (transcoders: paired MLP input/output, the splice) and
:mod:`~iclr26.sae.circuit_insights` (WeightLens, the activation baseline, CircuitLens' exact decomposition).
``from iclr26.sae import TopKSAE`` is the way in.
"""

from iclr26.sae import archetypal as _archetypal
from iclr26.sae import batchtopk as _batchtopk
from iclr26.sae import circuit_insights as _circuit_insights
from iclr26.sae import dictionary as _dictionary
from iclr26.sae import inference as _inference
from iclr26.sae import loca as _loca
from iclr26.sae import metrics as _metrics
from iclr26.sae import temporal as _temporal
from iclr26.sae import training as _training
from iclr26.sae import transcoder as _transcoder
from iclr26.sae.archetypal import *  # noqa: F403
from iclr26.sae.batchtopk import *  # noqa: F403
from iclr26.sae.circuit_insights import *  # noqa: F403
from iclr26.sae.dictionary import *  # noqa: F403 (each module's __all__)
from iclr26.sae.inference import *  # noqa: F403
from iclr26.sae.loca import *  # noqa: F403
from iclr26.sae.metrics import *  # noqa: F403
from iclr26.sae.temporal import *  # noqa: F403
from iclr26.sae.training import *  # noqa: F403
from iclr26.sae.transcoder import *  # noqa: F403

__all__ = [
    *_dictionary.__all__,
    *_archetypal.__all__,
    *_batchtopk.__all__,
    *_loca.__all__,
    *_temporal.__all__,
    *_training.__all__,
    *_metrics.__all__,
    *_inference.__all__,
    *_transcoder.__all__,
    *_circuit_insights.__all__,
]
