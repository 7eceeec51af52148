"""Benchmarks: training speed side by side with SBX (`speed`) and sample efficiency over seeds (`returns`)."""
