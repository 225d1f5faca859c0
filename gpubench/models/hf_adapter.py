"""Hugging Face transformers language models by name (`hf:gpt2`), random weights, offline.

The model is built from its configuration class (`AutoConfig.for_model(model_type, **options)`,
no hub download) as a causal language model (`AutoModelForCausalLM.from_config`), trained on
random token ids of the model's vocabulary with next-token cross-entropy.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from gpubench.models import adapted, library_import
from gpubench.models.workload import Workload, generator, language_model

PREFIX = "hf"
# Tokens per sample unless the suite sets seq_len: GPT-2's context, capped by the model's own.
DEFAULT_SEQ_LEN = 1024


def _library(name: str) -> Any:
    try:
        import transformers
    except (ImportError, RuntimeError) as e:
        # transformers imports torchvision whenever it is installed, and then reports only
        # that some model class "could not be imported"
        library_import.blame_torchvision(name, "transformers", e)
        if not isinstance(e, ImportError):
            raise
        raise ValueError(
            f"model {name!r} needs transformers, which cannot be imported ({e}); "
            "install it with: pip install 'gpubench[hf]'"
        ) from e
    return transformers


def build(model_type: str, options: dict[str, Any]) -> Workload:
    """The Workload of a Hugging Face model type (`gpt2`, `llama`, ...); `options` are fields of
    its configuration plus `seq_len` (tokens per sample)."""
    name = f"{PREFIX}:{model_type}"
    tf = _library(name)
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if model_type not in CONFIG_MAPPING:
        raise adapted.unknown_model(model_type, CONFIG_MAPPING.keys(), "transformers")
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise adapted.unknown_model(
            model_type, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, "transformers (as a causal LM)"
        )
    options = dict(options)
    seq_len = options.pop("seq_len", None)
    config_class = CONFIG_MAPPING[model_type]
    fields = {*config_class().to_dict(), *getattr(config_class, "attribute_map", {})}
    internal = {"model_type", "transformers_version", "architectures"}
    fields = {f for f in fields if not f.startswith("_")} - internal
    adapted.check_options(name, options, {*fields, "seq_len"})
    # no key/value cache: training never reads it, and it would hold memory
    config = tf.AutoConfig.for_model(model_type, **{"use_cache": False, **options})
    longest = getattr(config, "max_position_embeddings", None)
    if seq_len is None:
        seq_len = min(DEFAULT_SEQ_LEN, longest or DEFAULT_SEQ_LEN)
    adapted.positive_int(name, "seq_len", seq_len)
    if longest is not None and seq_len > longest:
        raise ValueError(
            f"model {name!r}: seq_len {seq_len} is above its max_position_embeddings {longest}; "
            f"allowed: 1 to {longest}"
        )
    try:
        model = tf.AutoModelForCausalLM.from_config(config)
    except (ImportError, RuntimeError) as e:  # the model's module failed to import
        library_import.blame_torchvision(name, "transformers", e)
        raise
    vocab = int(config.vocab_size)

    def sequences(batch_size: int, device: torch.device, seed: int) -> Tensor:
        g = generator(device, seed)
        return torch.randint(vocab, (batch_size, seq_len + 1), generator=g, device=device)

    flops = training_flops_per_sample(model, config, seq_len)
    return language_model(name, adapted.Logits(model), sequences, seq_len, flops)


def training_flops_per_sample(model: nn.Module, config: Any, seq_len: int) -> float:
    """Forward + backward FLOPs of one sequence, as for the reference transformer: 3x the
    forward's 2 FLOPs per weight of every matmul layer per token (nn.Linear and transformers'
    Conv1D; a tied head counted once, as it runs once), plus 4*T*d per layer per token for the
    attention scores and their weighted sum over the full T x T matrix."""
    matmul_weights = 0
    for m in model.modules():
        if isinstance(m, nn.Linear) or type(m).__name__ == "Conv1D":
            weight: Tensor = m.weight  # type: ignore[assignment]
            matmul_weights += weight.numel()
    d, layers = int(config.hidden_size), int(config.num_hidden_layers)
    per_token_forward = 2 * matmul_weights + 4 * seq_len * d * layers
    return 3.0 * per_token_forward * seq_len
