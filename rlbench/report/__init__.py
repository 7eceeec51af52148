"""What finished runs show: learning curves and their statistics (plots), for the sweep and the benchmarks."""
