"""Per-sample flag bits of estimates (uint8), defined once for the whole of ``edge``.

=====  ======================  =============================================================
bit    name                    meaning
=====  ======================  =============================================================
0 (1)  FLAG_HELD               an input used by this estimate was non-finite and held at its
                               last finite value (the daemon calls it FLAG_NONFINITE)
1 (2)  FLAG_WARMUP             no estimate yet (window/lag not full): the row is NaN
2 (4)  FLAG_SATURATED          a channel was saturated (set by the acquisition layer)
3 (8)  FLAG_GAP                a conversion was lost before this sample (edge.hw, ring)
4 (16) FLAG_SUSPECT            implausible jump in a raw sample, e.g. a SPI bit error (edge.hw)
5 (32) FLAG_MODEL_SUSPECT      the model check failed: the windowed normalised innovation
                               squared exceeds its threshold (smoother estimator only)
6 (64) FLAG_OVERFLOW           the estimate is not finite although it is past warm-up:
                               arithmetic overflow (an input or a bundle value far out of
                               range, or a diverged state); a non-finite estimate always
                               carries a flag (this one, or warm-up)
7 (128) FLAG_ENVELOPE          hybrid twin: for a sample used by this estimate the
                               correction was not applied (the linear model's step there):
                               the state was outside the network's trained envelope, or the
                               network's output was not finite or absurd (beyond the bound of
                               edge.estimator.hybrid.output_bound); set exactly when the
                               linear estimate was used
=====  ======================  =============================================================
"""

FLAG_HELD = 1
FLAG_WARMUP = 2
FLAG_SATURATED = 4
FLAG_GAP = 8
FLAG_SUSPECT = 16
FLAG_MODEL_SUSPECT = 32
FLAG_OVERFLOW = 64
FLAG_ENVELOPE = 128

FLAG_NAMES = {FLAG_HELD: "held", FLAG_WARMUP: "warmup", FLAG_SATURATED: "saturated",
              FLAG_GAP: "gap", FLAG_SUSPECT: "suspect", FLAG_MODEL_SUSPECT: "model_suspect",
              FLAG_OVERFLOW: "overflow", FLAG_ENVELOPE: "envelope"}
