"""Truncated Quantile Critics (Kuznetsov et al. 2020): SAC with distributional critics whose pooled
target quantiles are truncated at the top; as SB3-contrib's and SBX's TQC."""
