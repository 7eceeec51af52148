"""A request becomes finished run folders: resolve and check it (experiment), size its memory (memory),
pick the device and the compilation cache, then launch the loop with its loggers and signals (launch)."""
