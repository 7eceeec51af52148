"""The soft (maximum-entropy) family's math, shared by SAC, DroQ, TQC and CrossQ: its config, the learner with
target critics, acting with gSDE, and the entropy temperature."""
