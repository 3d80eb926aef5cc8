"""torch's error messages, read: one table from what a message says to its cause and its fix.

Two chapters explain errors: chapter 02's :func:`helpers.device.explain_device_error`
(which the checks use when a learner's code mixes up devices) and chapter 07's
:func:`helpers.troubleshoot.explain_error`. Both read :data:`RULES`, so one
mistake gets one explanation wherever the learner meets it.

Rules read the message, not the exception's type: torch raises RuntimeError
for most of these, and a CUDA error reaches Python only as text. The causes and
fixes are English in the table (``N_``) and handed out in the learner's language
(:func:`diagnosis_of`); the needles stay English, as torch's messages are.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Collection

import torch

from helpers.i18n import N_, _

__all__ = ["Diagnosis", "NonFiniteError", "RULES", "Rule", "diagnosis_of"]


class NonFiniteError(RuntimeError):
    """A NaN or an Inf that the course's own hooks found (:func:`helpers.troubleshoot.stop_at_nonfinite`).

    A type of its own so that the ``nan`` rule recognises it whatever language its message is in (the needles are
    English, as torch's messages are; the course's own messages may be Korean).
    """


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """What an error means: a short ``category``, its likely ``cause``, and the ``fix``."""

    category: str
    cause: str
    fix: str

    def __str__(self) -> str:
        # _() again: a Diagnosis read straight from RULES is still English (a translated text passes unchanged)
        return _("[{category}] {cause}\n  fix: {fix}").format(category=self.category, cause=_(self.cause),
                                                              fix=_(self.fix))

    def translated(self) -> Diagnosis:
        """This diagnosis with its cause and fix in the current language (the category is an identifier)."""
        return dataclasses.replace(self, cause=_(self.cause), fix=_(self.fix))


@dataclasses.dataclass(frozen=True)
class Rule:
    """A :class:`Diagnosis` and how to recognise its error.

    ``needles``: lower-case fragments, any of which in the lower-cased message
    is a match; ``types``: exception types that match whatever their message
    says (a ``torch.OutOfMemoryError`` is memory even when worded by MPS).
    """

    needles: tuple[str, ...]
    diagnosis: Diagnosis
    types: tuple[type[BaseException], ...] = ()

    def matches(self, err: BaseException | str) -> bool:
        text = str(err).lower()
        return isinstance(err, self.types) or any(needle in text for needle in self.needles)


#: First match wins: the order is part of the table (a message that fits two rules gets the earlier one).
RULES: tuple[Rule, ...] = (
    Rule(("out of memory",), Diagnosis(
        "memory", N_("the tensors alive at that moment did not fit in the device's memory"),
        N_("smaller batch, autocast (AMP), gradient accumulation, torch.no_grad()/inference_mode() for "
           "evaluation; free what a failed attempt left (flag in except, free outside)")),
        types=(torch.OutOfMemoryError,)),
    Rule(("dtype", "scalar type"), Diagnosis(
        "dtype", N_("tensors of different dtypes meet (float64 data into a float32 model, float class labels)"),
        N_("convert: x.float() for inputs, y.long() for class labels"))),
    Rule(("shape", "size of tensor", "batch_size", "size mismatch"), Diagnosis(
        "shape", N_("the tensors' shapes do not fit together (features, batch size)"),
        N_("print x.shape before the failing layer; reshape, or fix the layer's in_features"))),
    Rule(("same device", "expected device", "device type"), Diagnosis(
        "device", N_("two tensors (or a tensor and the model's weights) are on different devices"),
        N_("move the input to the model's device with x = x.to(device) (the labels too: y = y.to(device)), and "
           "the model too if it is not there yet (model.to(device)), before the forward pass"))),
    Rule(("between 0 and 1",), Diagnosis(
        "range", N_("BCELoss was given values outside [0, 1] (logits, not probabilities)"),
        N_("use BCEWithLogitsLoss on the raw logits (or apply sigmoid first)"))),
    Rule(("device-side assert", "n_classes", "index out of range", "out of bounds"), Diagnosis(
        "index", N_("an index out of range: a label >= number of classes, a negative label, an Embedding index "
                    "beyond its rows (on CUDA this is the usual 'device-side assert')"),
        N_("check labels and indices: 0 <= label < num_classes (y.min(), y.max()); rerun on the CPU or with "
           "CUDA_LAUNCH_BLOCKING=1 to see where"))),
    Rule(("nan", "inf values", "non-finite", "not finite"), Diagnosis(
        "nan", N_("a NaN or Inf appeared (log(0), division by zero, a learning rate too large)"),
        N_("find the first non-finite tensor (detect_anomaly, torch.isfinite), use log_softmax/cross_entropy, "
           "clip gradients, lower the learning rate")),
        types=(NonFiniteError,)),
    # a CPU build of torch; a CUDA build with no GPU visible; a CUDA build without the NVIDIA driver (what a plain
    # `pip install torch` gives a Linux laptop). Not "nvidia driver" alone: "driver is too old" is another problem.
    Rule(("not compiled with cuda", "no cuda gpus are available", "no nvidia driver"), Diagnosis(
        "no-cuda", N_("the code asked for CUDA explicitly (.cuda(), device='cuda') on a machine, or a build of "
                      "torch, without it"),
        N_("use the device you were given, or pick one once (torch.cuda.is_available()) and pass it around, "
           "instead of hard-coding 'cuda'"))),
)


def diagnosis_of(err: BaseException | str, categories: Collection[str] | None = None) -> Diagnosis | None:
    """The :class:`Diagnosis` of the first rule in :data:`RULES` that ``err`` (or its text) matches, or None.

    ``categories`` keeps only those rules: a chapter that explains only its
    own kind of error says nothing about the others.
    """
    sys.audit("course.version", "helpers.errors:diagnosis_of")  # the grader: no exercise passes by calling this
    rules = [r for r in RULES if categories is None or r.diagnosis.category in categories]
    found = next((r.diagnosis for r in rules if r.matches(err)), None)
    # translated here, not in each reader: chapter 02's explain_device_error, chapter 07's notebook (which prints
    # diagnosis.fix) and a learner's diagnose that returns found.fix all read it in the learner's language
    return None if found is None else found.translated()
